"""A real PostgreSQL 15 with plpython3u for the SQL tests, never a mock.

Where it comes from, in order: $PG_KDE_TEST_DSN (a server you provide, with pg_kde's files installed and
its PL/Python able to import pg_kde); a Docker engine, when one is reachable and testcontainers is
installed (the image from docker/Dockerfile); otherwise a throwaway local cluster started by
pg_kde.server in a temporary directory and removed afterwards.
"""

import os
import sys
import uuid

import pytest

psycopg = pytest.importorskip("psycopg")
sys.path.insert(0, os.path.dirname(__file__))  # sqlhelpers, shared by the test modules here

import pg_kde  # noqa: E402
from pg_kde import admin, server  # noqa: E402


def _docker_reachable() -> bool:
    try:
        import docker  # noqa: F401 - testcontainers depends on it
        import testcontainers.postgres  # noqa: F401
    except ImportError:
        return False
    try:
        return bool(docker.from_env(timeout=3).ping())
    except Exception:
        return False


def _docker_server():
    from pathlib import Path

    from testcontainers.core.image import DockerImage
    from testcontainers.postgres import PostgresContainer

    root = Path(__file__).resolve().parents[2]
    image = DockerImage(path=str(root), dockerfile_path="docker/Dockerfile", tag="pg_kde-test:latest")
    image.build()
    container = PostgresContainer(str(image), username="postgres", password="postgres", dbname="postgres")
    container.start()
    host, port = container.get_container_host_ip(), container.get_exposed_port(5432)
    return f"host={host} port={port} user=postgres password=postgres dbname=postgres", container.stop


@pytest.fixture(scope="session")
def server_dsn(tmp_path_factory):
    """A libpq DSN for the maintenance database of a server with pg_kde available."""
    if os.environ.get("PG_KDE_TEST_DSN"):
        yield os.environ["PG_KDE_TEST_DSN"]
        return
    if _docker_reachable():
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
