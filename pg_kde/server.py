"""The embedded local PostgreSQL cluster that ``make demo`` and the tests use (``pg-kde server ...``).

A throwaway cluster for one user's tests and demos, not a production server; but other users of the
machine can neither reach it nor tamper with it:

- State lives in ``.pg_kde/`` in the working directory, a directory of ours with mode 0700 (checked on
  every use, never followed if it is a link): ``cluster.json`` says where the cluster is, ``pgpass`` holds
  the superuser's password (a libpq password file, mode 0600).
- The cluster (data/, the Unix socket, server.log, python/ when staged) lives in a private base
  directory: ``.pg_kde/cluster`` when we are not root; as root (``initdb`` refuses root) it runs as the
  ``postgres`` user from a directory that ``mkdtemp`` creates under /var/tmp (an unpredictable name,
  made atomically with mode 0700) and then hands to that user. A recorded base is reused only while it
  is still a real directory (not a link) owned by the server's user with no access for group or others;
  otherwise :func:`start` raises :class:`ServerError` and touches nothing.
- The server listens on that socket only (``listen_addresses = ''``), which the base keeps away from
  other users, and every connection, local ones too, needs the password (``scram-sha-256``): a random
  one given to ``initdb`` through a file only the server's user can read, deleted afterwards.
  :meth:`Cluster.dsn` names the password file, so ``psql "<dsn>"``, psycopg and
  ``pg_dump --dbname="<dsn>"`` connect without asking for it.
- PL/Python imports pg_kde from the environment this module runs in; when the server's user cannot read
  that, the needed packages are copied into ``<base>/python`` (made by us inside the private base on
  every start) and the server's ``PYTHONPATH`` points there.

A cluster recorded by an earlier pg_kde (trust authentication, a predictable directory) is not reused:
:func:`start` says to remove it with ``pg-kde server destroy``. Recreating it silently would delete its
databases, and a directory at a predictable path is not ours to trust until :func:`destroy` has checked it.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import socket
import stat
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

SERVER_USER = "postgres"
STATE_DIR = ".pg_kde"
#: Where root's clusters are made (each in its own mkdtemp directory).
ROOT_BASE_PARENT = "/var/tmp"
PYTHON_PACKAGES = ("pg_kde", "numpy", "scipy")
#: Mode bits a private directory or file must not have: none for group or others.
GROUP_OR_OTHER = 0o077


class ServerError(RuntimeError):
    """The local cluster could not be started, stopped or found, or its files are not safe to use."""


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


def _server_account() -> tuple:
    """(uid, gid) the server runs as: the ``postgres`` user as root, else ourselves."""
    if not _as_root():
        return os.geteuid(), os.getegid()
    user = pwd.getpwnam(SERVER_USER)
    return user.pw_uid, user.pw_gid


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


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


def _conninfo_value(value) -> str:
    """A value for a libpq key=value connection string, quoted when it has spaces, quotes or backslashes."""
    text = str(value)
    if text and re.fullmatch(r"[^\s'\\]+", text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class Cluster:
    """A local cluster: ``base`` holds data/, the socket and server.log; ``passfile`` the superuser's
    password (None for a cluster recorded before password authentication)."""

    workdir: str
    base: str
    port: int
    python_path: str
    passfile: Optional[str] = None

    @property
    def datadir(self) -> Path:
        return Path(self.base) / "data"

    @property
    def log(self) -> Path:
        return Path(self.base) / "server.log"

    def dsn(self, dbname: str = "postgres") -> str:
        params = {"host": self.base, "port": self.port, "dbname": dbname, "user": SERVER_USER}
        if self.passfile:
            params["passfile"] = self.passfile
        return " ".join(f"{key}={_conninfo_value(value)}" for key, value in params.items())


def _state_dir(workdir: Path) -> Path:
    return workdir / STATE_DIR


def _state_file(workdir: Path) -> Path:
    return _state_dir(workdir) / "cluster.json"


def _unsafe_because(path, kind: str, owner_uid: int, forbidden_bits: int = GROUP_OR_OTHER) -> Optional[str]:
    """Why ``path`` may not be used as a private ``kind`` ("directory" or "file") of ``owner_uid``, or None.

    Checked with lstat, so a symbolic link is reported, never followed; the path must also have no link
    among its parents (its real path is itself)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        return f"a symbolic link (to {os.readlink(path)})"
    is_kind = stat.S_ISDIR if kind == "directory" else stat.S_ISREG
    if not is_kind(st.st_mode):
        return f"not a {kind}"
    if st.st_uid != owner_uid:
        return f"owned by {_user_name(st.st_uid)}, not {_user_name(owner_uid)}"
    if st.st_mode & forbidden_bits:
        return f"open to other users (mode {stat.S_IMODE(st.st_mode):04o})"
    if os.path.realpath(path) != os.path.abspath(path):
        return f"reached through a symbolic link (it is really {os.path.realpath(path)})"
    return None


def _check_state_dir(workdir: Path) -> None:
    """Raise ServerError unless workdir/.pg_kde is a directory of ours that nobody else can write to (so
    what it holds is what we wrote; :func:`start` also closes it to reading, mode 0700)."""
    state_dir = _state_dir(workdir)
    problem = _unsafe_because(state_dir, "directory", os.geteuid(), forbidden_bits=0o022)
    if problem:
        raise ServerError(
            f"{state_dir} is {problem}; pg_kde keeps its server state only in a directory of "
            f"{_user_name(os.geteuid())} with mode 0700. Remove it (or chmod 700 it if it is yours and you "
            "trust its contents) and start again."
        )


def _write_private_file(path: Path, text: str, owner: Optional[tuple] = None) -> None:
    """Write ``text`` to a new file of mode 0600 (owned by ``owner`` = (uid, gid) when given), replacing
    ``path`` atomically; a link at ``path`` is replaced, never followed."""
    staging = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        if owner:
            os.fchown(fd, *owner)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(staging, path)


def load(workdir: str | os.PathLike = ".") -> Cluster | None:
    """The cluster recorded for ``workdir``, or None. Raises ServerError when .pg_kde/ or its state file
    are not private to us (someone else could have written them)."""
    workdir = Path(workdir).resolve()
    if not os.path.lexists(_state_dir(workdir)):
        return None
    _check_state_dir(workdir)
    state = _state_file(workdir)
    if not os.path.lexists(state):
        return None
    problem = _unsafe_because(state, "file", os.geteuid(), forbidden_bits=0o022)
    if problem:
        raise ServerError(f"the server state file {state} is {problem}; remove {state.parent} to start over")
    try:
        return Cluster(**json.loads(state.read_text()))
    except (ValueError, TypeError) as exc:
        raise ServerError(f"the server state file {state} is not readable ({exc}); remove {state.parent} "
                          "to start over") from exc


def _base_problem(cluster: Cluster, forbidden_bits: int = GROUP_OR_OTHER) -> Optional[str]:
    return _unsafe_because(cluster.base, "directory", _server_account()[0], forbidden_bits)


def _check_reusable(cluster: Cluster, workdir: Path) -> None:
    """Raise ServerError (changing nothing) unless the recorded cluster is safe to start or reuse."""
    state = _state_file(workdir)
    if cluster.passfile is None:
        raise ServerError(
            f"the cluster recorded in {state} (in {cluster.base}) was made by an older pg_kde with trust "
            "authentication, which lets every local user connect as superuser; it is not reused. Remove it "
            f"(this deletes its databases) with: pg-kde server destroy --dir {workdir}, then start again."
        )
    problem = _base_problem(cluster)
    if problem:
        raise ServerError(
            f"the cluster directory {cluster.base} recorded in {state} is {problem}; it must be a directory "
            f"of {_user_name(_server_account()[0])} with mode 0700. Nothing was changed. If you did not do "
            f"this, someone may be tampering with it: find out what it is, then remove {state.parent} to "
            "start a new cluster."
        )
    problem = _unsafe_because(cluster.passfile, "file", os.geteuid())
    if problem:
        raise ServerError(f"the password file {cluster.passfile} recorded in {state} is {problem}; remove "
                          f"the cluster with: pg-kde server destroy --dir {workdir}, then start again.")


def _readable_by_server(path: Path) -> bool:
    if not _as_root():
        return os.access(path, os.R_OK)
    return subprocess.run(["runuser", "-u", SERVER_USER, "--", "test", "-r", str(path)]).returncode == 0


def server_python_path(base: Path) -> str:
    """A PYTHONPATH under which the server's Python imports pg_kde, numpy and scipy.

    The installed packages when the server's user can read them; otherwise a fresh copy in
    ``base/python``, made by us inside the private base (an earlier copy is removed first)."""
    import pg_kde

    site = Path(pg_kde.__file__).resolve().parent.parent
    if _readable_by_server(site / "pg_kde" / "__init__.py"):
        return str(site)
    staged = Path(base) / "python"
    if os.path.lexists(staged):
        if os.path.isdir(staged) and not os.path.islink(staged):
            shutil.rmtree(staged)
        else:
            os.unlink(staged)
    os.mkdir(staged, 0o755)
    for name in PYTHON_PACKAGES:
        package = Path(importlib.import_module(name).__file__).resolve().parent
        shutil.copytree(package, staged / name)
        libs = package.parent / f"{name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, staged / libs.name)
    os.chmod(staged, 0o755)
    return str(staged)


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


def _make_state_dir(workdir: Path) -> Path:
    """workdir/.pg_kde with mode 0700: created if missing, closed if it was readable by others (as earlier
    pg_kde versions made it); ServerError if it is not a directory of ours that only we can write to."""
    state_dir = _state_dir(workdir)
    try:
        os.mkdir(state_dir, 0o700)
    except FileExistsError:
        pass
    _check_state_dir(workdir)
    os.chmod(state_dir, 0o700)
    return state_dir


def _new_base(state_dir: Path) -> Path:
    """A new private directory for a cluster (mode 0700, owned by the server's user).

    As root: ``mkdtemp`` under /var/tmp (an unpredictable name, created atomically, so nobody can plant a
    link or a directory there first), then handed to ``postgres``. Otherwise ``.pg_kde/cluster`` inside
    our private state directory."""
    if not _as_root():
        base = state_dir / "cluster"
        try:
            os.mkdir(base, 0o700)
        except FileExistsError:
            raise ServerError(f"{base} exists but no cluster is recorded for it; remove {state_dir} to start "
                              "over")
        return base
    base = Path(tempfile.mkdtemp(prefix="pg_kde-", dir=os.path.realpath(ROOT_BASE_PARENT)))
    os.chown(base, *_server_account(), follow_symlinks=False)
    return base


def _initdb(bindir: Path, base: Path) -> str:
    """initdb base/data with password authentication for every connection; returns the superuser's password.

    The password reaches initdb through a file of mode 0600 owned by the server's user inside the private
    base, deleted as soon as initdb has read it."""
    password = secrets.token_urlsafe(32)
    pwfile = base / "initdb-password"
    _write_private_file(pwfile, password + "\n", owner=_server_account())
    try:
        _run([bindir / "initdb", "-D", base / "data", "-U", SERVER_USER, f"--pwfile={pwfile}",
              "--auth=scram-sha-256", "-E", "UTF8", "--no-instructions"])
    finally:
        pwfile.unlink(missing_ok=True)
    return password


def start(workdir: str | os.PathLike = ".", port: int | None = None) -> Cluster:
    """Start (initialising on first use) the local cluster of ``workdir``; a running one is reused.

    Raises ServerError, changing nothing, when the recorded state or cluster directory is not private
    (see the module docstring) or was made by an older pg_kde with trust authentication."""
    workdir = Path(workdir).resolve()
    recorded = load(workdir)
    if recorded is not None and not os.path.lexists(recorded.base):
        recorded = None  # deleted (say, by a clean-up of /var/tmp): a new cluster in a new directory
    if recorded is not None:
        _check_reusable(recorded, workdir)
        if _running(recorded):
            return recorded
    state_dir = _make_state_dir(workdir)
    base = Path(recorded.base) if recorded else _new_base(state_dir)
    passfile = Path(recorded.passfile) if recorded else state_dir / "pgpass"
    bindir = pg_bindir()
    if not (base / "data" / "PG_VERSION").exists():
        try:
            password = _initdb(bindir, base)
        except ServerError:
            if recorded is None:  # a directory we just made: do not leave it behind
                shutil.rmtree(base, ignore_errors=True)
            raise
        _write_private_file(passfile, f"*:*:*:{SERVER_USER}:{password}\n")
    cluster = Cluster(str(workdir), str(base), port or (recorded.port if recorded else _free_port()),
                      server_python_path(base), str(passfile))
    # Recorded before starting, so a failed start is retried in the same directory (or destroyed).
    _write_private_file(_state_file(workdir), json.dumps(asdict(cluster), indent=2))
    env = dict(os.environ, PYTHONPATH=cluster.python_path)
    # The socket only, in the private base, and closed to other users even if the base were not.
    options = (f"-p {cluster.port} -k {shlex.quote(str(base))} -c listen_addresses='' "
               "-c unix_socket_permissions=0700")
    result = _run([bindir / "pg_ctl", "start", "-w", "-t", "60", "-D", cluster.datadir, "-l", cluster.log,
                   "-o", options], env=env, check=False)
    if result.returncode != 0:
        log = cluster.log.read_text()[-2000:] if cluster.log.exists() else ""
        raise ServerError(f"the local PostgreSQL did not start:\n{result.stdout}{result.stderr}\n{log}")
    return cluster


def _check_removable(cluster: Cluster, workdir: Path) -> None:
    """Raise ServerError unless the recorded base is a real directory of the server's user that nobody
    else can write to (clusters of older pg_kde versions had mode 0755, which is allowed here)."""
    problem = _base_problem(cluster, forbidden_bits=0o022)
    if problem and problem != "missing":
        raise ServerError(f"the cluster directory {cluster.base} recorded in {_state_file(workdir)} is "
                          f"{problem}; not stopping or deleting anything there. Find out what it is, then "
                          f"remove {_state_dir(workdir)}.")


def stop(workdir: str | os.PathLike = ".") -> bool:
    """Stop the local cluster of ``workdir``; False if none was running."""
    workdir = Path(workdir).resolve()
    cluster = load(workdir)
    if cluster is None:
        return False
    _check_removable(cluster, workdir)
    if not _running(cluster):
        return False
    _run([pg_bindir() / "pg_ctl", "stop", "-w", "-m", "fast", "-D", cluster.datadir])
    return True


def destroy(workdir: str | os.PathLike = ".") -> None:
    """Stop the cluster and delete its files and state."""
    workdir = Path(workdir).resolve()
    stop(workdir)
    cluster = load(workdir)
    if cluster is None:
        return
    shutil.rmtree(cluster.base, ignore_errors=True)
    if cluster.passfile:
        Path(cluster.passfile).unlink(missing_ok=True)
    _state_file(workdir).unlink(missing_ok=True)
