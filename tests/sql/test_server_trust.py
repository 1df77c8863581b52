"""pg_kde.server against another local user: each attack is tried as the OS user ``nobody``.

The embedded server runs as root's ``postgres`` user with a superuser that can run plpython3u, so a
link it follows, a file it runs or a socket it leaves open is a way to root. These tests plant links and
directories where the server could go, doctor its state file, try to alter the staged Python packages and
try to connect, and check that nothing was followed, changed or let in.
"""

import hashlib
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from pg_kde import server

#: They start clusters of their own on this machine, whatever server the other SQL tests use.
pytestmark = pytest.mark.local_cluster

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the attacks run as the OS user nobody (runuser) and the server as postgres: needs root"
)


def as_nobody(*cmd) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "nobody", "--", *map(str, cmd)], capture_output=True, text=True)


def snapshot(*paths) -> dict:
    """Every entry under ``paths`` (links not followed): owner, group, mode, size, mtime and link target."""
    seen = {}
    for top in map(str, paths):
        entries = [top]
        if os.path.isdir(top) and not os.path.islink(top):
            for root, dirs, files in os.walk(top):
                entries += [os.path.join(root, name) for name in dirs + files]
        for path in entries:
            st = os.lstat(path)
            link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
            seen[path] = (st.st_uid, st.st_gid, st.st_mode, st.st_size, st.st_mtime_ns, link)
    return seen


def postgres_dir(mode: int) -> Path:
    """A new directory under /var/tmp owned by postgres with ``mode`` (the caller removes it)."""
    path = Path(tempfile.mkdtemp(prefix="pg_kde-test-", dir="/var/tmp"))
    user = pwd.getpwnam("postgres")
    os.chown(path, user.pw_uid, user.pw_gid)
    os.chmod(path, mode)
    return path


@pytest.fixture
def nobody_dir():
    """A directory of the user nobody under /var/tmp, where that user plants things; removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="pg_kde-test-nobody-", dir="/var/tmp"))
    user = pwd.getpwnam("nobody")
    os.chown(path, user.pw_uid, user.pw_gid)
    yield path
    shutil.rmtree(path)


def record(workdir: Path, base) -> None:
    """A private state directory and files, as start() writes them, recording ``base`` as the cluster."""
    state_dir = workdir / ".pg_kde"
    state_dir.mkdir(mode=0o700)
    passfile = state_dir / "pgpass"
    passfile.touch(mode=0o600)
    state = {"workdir": str(workdir), "base": str(base), "port": 5999, "python_path": "/nowhere",
             "passfile": str(passfile)}
    (state_dir / "cluster.json").write_text(json.dumps(state))
    (state_dir / "cluster.json").chmod(0o600)


@needs_root
def test_a_link_at_the_old_predictable_path_is_not_followed(tmp_path):
    workdir, target = tmp_path / "work", tmp_path / "target"
    workdir.mkdir()
    target.mkdir(mode=0o700)
    old_base = Path("/var/tmp") / f"pg_kde-{hashlib.sha1(str(workdir).encode()).hexdigest()[:12]}"
    assert as_nobody("ln", "-s", target, old_base).returncode == 0
    before = snapshot(target)
    try:
        cluster = server.start(workdir)
        try:
            assert Path(cluster.base) != old_base and Path(cluster.base).parent == Path("/var/tmp")
            st = os.lstat(cluster.base)
            assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
            assert st.st_uid == pwd.getpwnam("postgres").pw_uid
        finally:
            server.destroy(workdir)
    finally:
        os.unlink(old_base)
    assert snapshot(target) == before


@needs_root
@pytest.mark.parametrize("planted", ["link", "directory"])
def test_a_state_directory_planted_by_another_user_is_refused(nobody_dir, tmp_path, planted):
    # root works in a directory of nobody's (say, a checkout nobody owns): nobody can put .pg_kde there.
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    if planted == "link":
        assert as_nobody("ln", "-s", target, nobody_dir / ".pg_kde").returncode == 0
    else:
        assert as_nobody("mkdir", "-m", "700", nobody_dir / ".pg_kde").returncode == 0
    before = snapshot(target, nobody_dir)
    with pytest.raises(server.ServerError, match=r"\.pg_kde is (a symbolic link|owned by nobody)"):
        server.start(nobody_dir)
    assert snapshot(target, nobody_dir) == before


@needs_root
@pytest.mark.parametrize("recorded", ["link", "directory of nobody", "mode 0755"])
def test_a_recorded_cluster_directory_that_is_not_private_is_refused(nobody_dir, tmp_path, recorded):
    private = postgres_dir(0o700)  # what a link points at: looks like a cluster directory
    try:
        if recorded == "link":
            base, expected = nobody_dir / "base", "a symbolic link"
            assert as_nobody("ln", "-s", private, base).returncode == 0
        elif recorded == "directory of nobody":
            base, expected = nobody_dir / "base", "owned by nobody, not postgres"
            assert as_nobody("mkdir", "-m", "700", base).returncode == 0
        else:
            base, expected = private, r"open to other users \(mode 0755\)"
            os.chmod(private, 0o755)
        workdir = tmp_path / "work"
        workdir.mkdir()
        record(workdir, base)
        before = snapshot(workdir, nobody_dir, private)
        with pytest.raises(server.ServerError, match=f"{re.escape(str(base))} recorded in .* is {expected}.*remove .*\\.pg_kde"):
            server.start(workdir)
        assert snapshot(workdir, nobody_dir, private) == before
    finally:
        shutil.rmtree(private)


@needs_root
def test_a_cluster_recorded_with_trust_authentication_is_not_reused(tmp_path):
    old_base = postgres_dir(0o755)  # what pg_kde made before password authentication
    try:
        workdir = tmp_path / "work"
        workdir.mkdir()
        record(workdir, old_base)
        state = json.loads((workdir / ".pg_kde" / "cluster.json").read_text())
        del state["passfile"]
        (workdir / ".pg_kde" / "cluster.json").write_text(json.dumps(state))
        (workdir / ".pg_kde" / "cluster.json").chmod(0o644)
        (workdir / ".pg_kde").chmod(0o755)
        before = snapshot(workdir, old_base)
        with pytest.raises(server.ServerError, match="trust authentication.*pg-kde server destroy --dir"):
            server.start(workdir)
        assert snapshot(workdir, old_base) == before
        server.destroy(workdir)  # what the message says to do
        assert not old_base.exists() and server.load(workdir) is None
    finally:
        shutil.rmtree(old_base, ignore_errors=True)


@pytest.fixture(scope="module")
def private_cluster(tmp_path_factory):
    """A cluster of its own, with pg_kde, numpy and scipy staged into base/python as for a virtual
    environment the server's user cannot read."""
    if os.geteuid() != 0:
        pytest.skip("needs root (the attacks run as nobody)")
    workdir = tmp_path_factory.mktemp("private_cluster")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(server, "_readable_by_server", lambda path: False)
        cluster = server.start(workdir)
    yield cluster
    server.destroy(workdir)


def test_nobody_can_neither_list_nor_change_the_cluster_directory(private_cluster):
    base = Path(private_cluster.base)
    staged_init = base / "python" / "pg_kde" / "__init__.py"
    assert private_cluster.python_path == str(base / "python") and staged_init.exists()
    code = staged_init.read_bytes()
    assert as_nobody("ls", base).returncode != 0
    assert as_nobody("ls", base / "python").returncode != 0
    assert as_nobody("mkdir", base / "python" / "planted").returncode != 0
    assert as_nobody("sh", "-c", f"echo 'import os' > {staged_init}").returncode != 0
    assert as_nobody("rm", "-rf", base / "python").returncode != 0
    assert staged_init.read_bytes() == code and not (base / "python" / "planted").exists()
    st = os.lstat(base)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == pwd.getpwnam("postgres").pw_uid
    state_dir = Path(private_cluster.workdir) / ".pg_kde"
    assert stat.S_IMODE(os.lstat(state_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(private_cluster.passfile).st_mode) == 0o600
    assert as_nobody("cat", private_cluster.passfile).returncode != 0


def psql_without_password(cluster, user=None) -> subprocess.CompletedProcess:
    """psql to the cluster's socket as the superuser, with no password: as root, or as ``user``."""
    cmd = [str(server.pg_bindir() / "psql"), "-w", "-h", cluster.base, "-p", str(cluster.port), "-U", "postgres",
           "-d", "postgres", "-Atc", "SELECT 1"]
    if user:
        cmd = ["runuser", "-u", user, "--", "env", "PGPASSFILE=/nonexistent", *cmd]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")} | {"PGPASSFILE": "/nonexistent"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def test_nobody_cannot_reach_the_socket(private_cluster):
    refused = psql_without_password(private_cluster, user="nobody")
    assert refused.returncode != 0 and "Permission denied" in refused.stderr


@pytest.mark.parametrize("user", [None, "postgres"])
def test_every_connection_needs_the_password(private_cluster, user):
    refused = psql_without_password(private_cluster, user=user)
    assert refused.returncode != 0 and "no password supplied" in refused.stderr
    hba = (Path(private_cluster.datadir) / "pg_hba.conf").read_text()
    methods = {line.split()[-1] for line in hba.splitlines() if line.strip() and not line.startswith("#")}
    assert methods == {"scram-sha-256"}
    # The DSN names the password file: psql and pg_dump get in with it.
    psql = subprocess.run([server.pg_bindir() / "psql", private_cluster.dsn(), "-Atc", "SELECT current_user"],
                          capture_output=True, text=True)
    assert psql.stdout.strip() == "postgres", psql.stderr
    dump = subprocess.run([server.pg_bindir() / "pg_dump", f"--dbname={private_cluster.dsn()}", "--schema-only"],
                          capture_output=True, text=True)
    assert dump.returncode == 0, dump.stderr
