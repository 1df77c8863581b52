"""A real PostgreSQL 15 with plpython3u for the SQL tests, never a mock.

Which server, in order:

- ``$PG_KDE_TEST_DSN``: a server you provide, with pg_kde's files installed and its PL/Python able to
  import pg_kde;
- ``PG_KDE_TEST_SERVER=docker``: a container of the image ``$PG_KDE_TEST_IMAGE`` (default
  ``pg_kde:latest``, built from docker/Dockerfile by ``tools/docker-build cpu``), started by testcontainers
  on the engine that ``DOCKER_HOST`` names, its port published on 127.0.0.1, removed at the end
  (``make docker-test`` does all of it). Testcontainers' reaper container (Ryuk) is off unless
  ``TESTCONTAINERS_RYUK_DISABLED`` says otherwise;
- ``PG_KDE_TEST_SERVER=local`` (the default, ``make test``): a throwaway local cluster started by
  pg_kde.server in a temporary directory and removed afterwards.

Tests marked ``local_cluster`` test pg_kde.server itself on this machine and use no server of the above:
they are skipped in the docker mode, which needs no PostgreSQL on this machine.
"""

import os
import sys
import uuid

import pytest

psycopg = pytest.importorskip("psycopg")
sys.path.insert(0, os.path.dirname(__file__))  # sqlhelpers, shared by the test modules here

import pg_kde  # noqa: E402
from pg_kde import admin, server  # noqa: E402

SERVER_KINDS = ("local", "docker")


def server_kind() -> str:
    """``dsn`` when $PG_KDE_TEST_DSN names a server, else $PG_KDE_TEST_SERVER (``local`` or ``docker``)."""
    if os.environ.get("PG_KDE_TEST_DSN"):
        return "dsn"
    kind = os.environ.get("PG_KDE_TEST_SERVER", "local")
    if kind not in SERVER_KINDS:
        raise pytest.UsageError(f"PG_KDE_TEST_SERVER={kind!r}: use one of {', '.join(SERVER_KINDS)}")
    return kind


def pytest_collection_modifyitems(config, items):
    if server_kind() != "docker":
        return
    skip = pytest.mark.skip(reason="tests pg_kde.server, the local cluster this machine runs as root (OS users "
                                   "postgres and nobody); PG_KDE_TEST_SERVER=docker starts none: run them with "
                                   "make test")
    for item in items:
        if "local_cluster" in item.keywords:
            item.add_marker(skip)


def _docker_server():
    """(DSN, stop) of a container of $PG_KDE_TEST_IMAGE started by testcontainers."""
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")  # its image is not pulled here; we remove ours
    # The published port on this machine's 127.0.0.1, even where a /.dockerenv (a machine made from an
    # image) makes testcontainers guess it runs inside a container and connect through the bridge gateway.
    os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")
    try:
        import docker
        from testcontainers.community.postgres import PostgresContainer
    except ImportError as exc:
        raise RuntimeError("PG_KDE_TEST_SERVER=docker needs testcontainers: pip install '.[docker]'") from exc
    image = os.environ.get("PG_KDE_TEST_IMAGE", "pg_kde:latest")
    try:
        docker.from_env(timeout=600).images.get(image)
    except docker.errors.ImageNotFound:
        raise RuntimeError(f"no image {image} at {os.environ.get('DOCKER_HOST', 'the default Docker engine')}: "
                           "build it with tools/docker-build cpu (make docker-test does)") from None
    password = uuid.uuid4().hex
    # Creating a container copies the image's whole file system under the vfs storage driver (about 45 s
    # for this image on the machines we tried): longer than docker-py's default timeout of 60 s allows for.
    container = PostgresContainer(image, username="postgres", password=password, dbname="postgres", driver=None,
                                  docker_client_kw={"timeout": 600})
    # Published on 127.0.0.1 alone, whatever the engine's default address (docker-py's (address,) form: a
    # port the engine picks; testcontainers' with_bind_ports takes no address).
    container.ports["5432"] = ("127.0.0.1",)
    container.start()
    try:
        host, port = container.get_container_host_ip(), container.get_exposed_port(5432)
        # An address, not "localhost": the port is published on IPv4 only.
        host = "127.0.0.1" if host == "localhost" else host
        with psycopg.connect(f"host={host} port={port} user=postgres password={password} dbname=postgres") as conn:
            version = conn.execute("SELECT version FROM pg_available_extension_versions "
                                   "WHERE name = 'pg_kde' AND version = %s", (pg_kde.__version__,)).fetchone()
        if version is None:
            raise RuntimeError(f"image {image} has no pg_kde {pg_kde.__version__}: rebuild it (tools/docker-build cpu)")
    except BaseException:
        container.stop()
        raise
    return f"host={host} port={port} user=postgres password={password} dbname=postgres", container.stop


@pytest.fixture(scope="session")
def server_dsn(tmp_path_factory):
    """A libpq DSN for the maintenance database of a server with pg_kde available."""
    kind = server_kind()
    if kind == "dsn":
        yield os.environ["PG_KDE_TEST_DSN"]
        return
    if kind == "docker":
        dsn, stop = _docker_server()
        try:
            yield dsn
        finally:
            stop()
        return
    admin.install()
    workdir = tmp_path_factory.mktemp("pg_kde_cluster")
    cluster = server.start(workdir)
    try:
        yield cluster.dsn()
    finally:
        server.destroy(workdir)


def _with_db(dsn: str, dbname: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, dbname=dbname)


@pytest.fixture(scope="session")
def database(server_dsn):
    """A fresh database with CREATE EXTENSION pg_kde CASCADE; dropped at the end."""
    name = f"pg_kde_test_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    dsn = _with_db(server_dsn, name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # The version of the package under test, whatever default another install left in the control file.
        conn.execute(f"CREATE EXTENSION pg_kde VERSION '{pg_kde.__version__}' CASCADE")
    yield dsn
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def db(database):
    with psycopg.connect(database, autocommit=True) as conn:
        yield conn


@pytest.fixture
def table(db):
    """A fresh table name (dropped afterwards)."""
    name = f"t_{uuid.uuid4().hex[:8]}"
    yield name
    db.execute(f'DROP TABLE IF EXISTS "{name}" CASCADE')


@pytest.fixture
def login_role(db, database):
    """A factory of LOGIN roles with passwords: ``login_role()`` -> (name, DSN of the test database as that
    role). Everything they own or were granted in the test database goes with them at the end."""
    made = []

    def make(*attributes):
        name = f"kde_role_{uuid.uuid4().hex[:8]}"
        password = uuid.uuid4().hex
        extra = " ".join(attributes)
        db.execute(f"CREATE ROLE {name} LOGIN {extra} PASSWORD '{password}'")
        made.append(name)
        return name, psycopg.conninfo.make_conninfo(database, user=name, password=password)

    yield make
    for name in made:
        db.execute(f"DROP OWNED BY {name} CASCADE")
        db.execute(f"DROP ROLE {name}")
