"""The embedded local PostgreSQL cluster that ``make demo`` and the tests use (``pg-kde server ...``).

State lives in ``.pg_kde/cluster.json`` in the working directory. The cluster itself (data, socket, log)
lives where the server's OS user can reach it: under ``.pg_kde/`` when we are not root; as root
(``initdb`` refuses root) it runs as the ``postgres`` user from ``/var/tmp/pg_kde-<hash of the working
directory>``, which also covers working directories that user cannot read. PL/Python imports pg_kde from
the environment this module runs in; when the server's user cannot read that, the needed packages are
copied next to the cluster and the server's ``PYTHONPATH`` points there.

The server listens on a Unix socket only (``listen_addresses = ''``) with trust authentication for local
connections: a throwaway cluster for one user's tests and demos, not a production server.
"""

from __future__ import annotations

import glob
import hashlib
import importlib
import json
import os
import pwd
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

SERVER_USER = "postgres"
STATE_DIR = ".pg_kde"
PYTHON_PACKAGES = ("pg_kde", "numpy", "scipy")


class ServerError(RuntimeError):
    """The local cluster could not be started, stopped or found."""


def pg_bindir() -> Path:
    """PostgreSQL's programs: $PG_BINDIR, else ``pg_config --bindir``, else the newest /usr/lib/postgresql/*/bin."""
    if os.environ.get("PG_BINDIR"):
        return Path(os.environ["PG_BINDIR"])
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").exists():
            return Path(out.stdout.strip())
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    if not found:
        raise ServerError("no PostgreSQL server programs found (install postgresql-15, or set PG_BINDIR)")
    return Path(found[-1]).parent


def _as_root() -> bool:
    return os.geteuid() == 0


def _run(cmd, env=None, check=True) -> subprocess.CompletedProcess:
    if _as_root():
        cmd = ["runuser", "-u", SERVER_USER, "--", *cmd]
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if check and result.returncode != 0:
        raise ServerError(f"{' '.join(map(str, cmd))} failed:\n{result.stdout}{result.stderr}")
    return result


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    """A local cluster: ``base`` holds data/, the socket and server.log."""

    workdir: str
    base: str
    port: int
    python_path: str

    @property
    def datadir(self) -> Path:
        return Path(self.base) / "data"

    @property
    def log(self) -> Path:
        return Path(self.base) / "server.log"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.base} port={self.port} dbname={dbname} user={SERVER_USER}"


def _state_file(workdir: Path) -> Path:
    return workdir / STATE_DIR / "cluster.json"


def _default_base(workdir: Path) -> Path:
    if not _as_root():
        return workdir / STATE_DIR / "cluster"
    digest = hashlib.sha1(str(workdir).encode()).hexdigest()[:12]
    return Path("/var/tmp") / f"pg_kde-{digest}"


def _readable_by_server(path: Path) -> bool:
    if not _as_root():
        return os.access(path, os.R_OK)
    return subprocess.run(["runuser", "-u", SERVER_USER, "--", "test", "-r", str(path)]).returncode == 0


def server_python_path(base: Path) -> str:
    """A PYTHONPATH under which the server's Python imports pg_kde, numpy and scipy."""
    import pg_kde

    site = Path(pg_kde.__file__).resolve().parent.parent
    if _readable_by_server(site / "pg_kde" / "__init__.py"):
        return str(site)
    staged = base / "python"
    for name in PYTHON_PACKAGES:
        package = Path(importlib.import_module(name).__file__).resolve().parent
        shutil.copytree(package, staged / name, dirs_exist_ok=True)
        libs = package.parent / f"{name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, staged / libs.name, dirs_exist_ok=True)
    os.chmod(staged, 0o755)
    return str(staged)


def load(workdir: str | os.PathLike = ".") -> Cluster | None:
    state = _state_file(Path(workdir).resolve())
    if not state.exists():
        return None
    return Cluster(**json.loads(state.read_text()))


def _running(cluster: Cluster | None) -> bool:
    if cluster is None or not cluster.datadir.exists():
        return False
    return _run([pg_bindir() / "pg_ctl", "status", "-D", cluster.datadir], check=False).returncode == 0


def status(workdir: str | os.PathLike = ".") -> dict:
    """{'running': bool, 'dsn': ..., 'base': ...} for the cluster of ``workdir`` (running False if none)."""
    cluster = load(workdir)
    if cluster is None or not cluster.datadir.exists():
        return {"running": False, "dsn": None, "base": None}
    return {"running": _running(cluster), "dsn": cluster.dsn(), "base": cluster.base, "log": str(cluster.log)}


def start(workdir: str | os.PathLike = ".", port: int | None = None) -> Cluster:
    """Start (initialising on first use) the local cluster of ``workdir``; a running one is reused."""
    workdir = Path(workdir).resolve()
    cluster = load(workdir)
    if _running(cluster):
        return cluster
    base = Path(cluster.base) if cluster else _default_base(workdir)
    base.mkdir(parents=True, exist_ok=True)
    if _as_root():
        pw = pwd.getpwnam(SERVER_USER)
        os.chown(base, pw.pw_uid, pw.pw_gid)
    os.chmod(base, 0o755)
    bindir = pg_bindir()
    datadir = base / "data"
    if not (datadir / "PG_VERSION").exists():
        _run([bindir / "initdb", "-D", datadir, "-A", "trust", "-U", SERVER_USER, "-E", "UTF8", "--no-instructions"])
    cluster = Cluster(str(workdir), str(base), port or (cluster.port if cluster else _free_port()), server_python_path(base))
    env = dict(os.environ, PYTHONPATH=cluster.python_path)
    options = f"-p {cluster.port} -k {base} -c listen_addresses=''"
    result = _run([bindir / "pg_ctl", "start", "-w", "-t", "60", "-D", datadir, "-l", cluster.log, "-o", options],
                  env=env, check=False)
    if result.returncode != 0:
        log = cluster.log.read_text()[-2000:] if cluster.log.exists() else ""
        raise ServerError(f"the local PostgreSQL did not start:\n{result.stdout}{result.stderr}\n{log}")
    state = _state_file(workdir)
    state.parent.mkdir(exist_ok=True)
    state.write_text(json.dumps(asdict(cluster), indent=2))
    return cluster


def stop(workdir: str | os.PathLike = ".") -> bool:
    """Stop the local cluster of ``workdir``; False if none was running."""
    cluster = load(workdir)
    if not _running(cluster):
        return False
    _run([pg_bindir() / "pg_ctl", "stop", "-w", "-m", "fast", "-D", cluster.datadir])
    return True


def destroy(workdir: str | os.PathLike = ".") -> None:
    """Stop the cluster and delete its files and state."""
    stop(workdir)
    cluster = load(workdir)
    if cluster is not None:
        shutil.rmtree(cluster.base, ignore_errors=True)
        _state_file(Path(workdir).resolve()).unlink(missing_ok=True)
