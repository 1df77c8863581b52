"""pg_kde.admin and the pg-kde command on a real PostgreSQL: admin calls pg_kde's functions whatever the
connection's search_path holds and puts only known option names into SQL; the command's failures are a
line a person can act on, never a traceback."""

import socket
import uuid

import psycopg
import pytest
from psycopg import sql

from pg_kde import admin, cli

#: A schema of look-alikes that raise: overloads a role could put before pg_kde's on a search_path, an
#: "=" that matches regclass (and text[]) exactly, and a kde_synopsis table holding a decoy row.
EVIL_SCHEMA = """
CREATE SCHEMA evil;
CREATE FUNCTION evil.trap() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil called'; END $$;
CREATE FUNCTION evil.kde_refresh(regclass, text) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb WHERE evil.trap()';
CREATE FUNCTION evil.kde_refresh(regclass, text, integer, integer) RETURNS jsonb
    LANGUAGE sql AS 'SELECT NULL::jsonb WHERE evil.trap()';
CREATE FUNCTION evil.kde_refresh(regclass, text[]) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb WHERE evil.trap()';
CREATE FUNCTION evil.kde_refresh_stale() RETURNS integer LANGUAGE sql AS 'SELECT 0 WHERE evil.trap()';
CREATE FUNCTION evil.eq(regclass, regclass) RETURNS boolean LANGUAGE sql AS 'SELECT evil.trap()';
CREATE OPERATOR evil.= (LEFTARG = regclass, RIGHTARG = regclass, FUNCTION = evil.eq);
CREATE FUNCTION evil.eq(text[], text[]) RETURNS boolean LANGUAGE sql AS 'SELECT evil.trap()';
CREATE OPERATOR evil.= (LEFTARG = text[], RIGHTARG = text[], FUNCTION = evil.eq);
CREATE VIEW evil.kde_synopses AS SELECT NULL::regclass AS relid WHERE evil.trap();
CREATE TABLE evil.kde_synopsis (relid regclass, cols text[]);
"""


@pytest.fixture
def evil_schema(db):
    db.execute(EVIL_SCHEMA)
    yield
    db.execute("DROP SCHEMA evil CASCADE")


def test_admin_calls_pg_kde_whatever_the_search_path(database, db, table, evil_schema):
    name = sql.Identifier(table)
    db.execute(sql.SQL("CREATE TABLE {} AS SELECT g::float8 AS x, sin(g)::float8 AS y "
                       "FROM generate_series(1, 500) g").format(name))
    db.execute("INSERT INTO evil.kde_synopsis VALUES (%s::regclass, '{x}')", (table,))
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("SET search_path = evil, public")
        with pytest.raises(psycopg.errors.RaiseException, match="evil called"):  # the trap is set
            conn.execute("SELECT kde_refresh(%s::regclass, 'x'::text)", (table,))
        summaries = admin.refresh(conn, [(table, "x"), (table, ["x", "y"])])
        assert [s["rows"] for s in summaries] == [500, 500]
        options = {"method": "plugin", "sample_size": 400, "grid_size": 64, "backend": "reference"}
        assert admin.refresh(conn, [(table, "y")], **options)[0]["rows"] == 500
        assert admin.refresh_stale(conn) >= 0
        listed = [r["cols"] for r in admin.list_synopses(conn) if r["relation"] == table]
        assert sorted(listed) == [["x"], ["x", "y"], ["y"]]
        assert admin.drop(conn, table, "x") and admin.drop(conn, table, ["y", "x"])
        assert not admin.drop(conn, table, "x")
    left = db.execute("SELECT cols FROM public.kde_synopsis WHERE relid = %s::regclass", (table,)).fetchall()
    assert left == [(["y"],)]
    assert db.execute("SELECT count(*) FROM evil.kde_synopsis").fetchone()[0] == 1  # the decoy is untouched


def test_refresh_accepts_only_kde_refresh_options(db, table):
    db.execute(sql.SQL("CREATE TABLE {} AS SELECT g::float8 AS x FROM generate_series(1, 100) g")
               .format(sql.Identifier(table)))
    injected = {f"method => 'plugin'); DROP TABLE {table}; --": 1}
    for options in ({"sample_sise": 100}, injected):
        with pytest.raises(ValueError, match="valid options: method, sample_size, grid_size, backend"):
            admin.refresh(db, [(table, "x")], **options)
    assert db.execute("SELECT count(*) FROM kde_synopsis WHERE relid = %s::regclass", (table,)).fetchone() == (0,)
    assert db.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone() == (100,)


@pytest.fixture
def database_without_pg_kde(server_dsn):
    """A fresh database where pg_kde is not installed; dropped afterwards."""
    name = f"pg_kde_empty_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield psycopg.conninfo.make_conninfo(server_dsn, dbname=name)
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_a_database_without_pg_kde_is_a_clear_error(database_without_pg_kde):
    with psycopg.connect(database_without_pg_kde, autocommit=True) as conn:
        for call in (admin.list_synopses, admin.refresh_stale, lambda c: admin.refresh(c, [("t", "x")]),
                     lambda c: admin.drop(c, "t", "x")):
            with pytest.raises(admin.ExtensionNotInstalledError, match=f"not installed in database {conn.info.dbname}"):
                call(conn)


def failure(capsys, *argv) -> list:
    """Run pg-kde with ``argv``; check it failed with exit status 1, a ``pg-kde:`` line, at most a ``hint:``
    line and no traceback; return the stderr lines."""
    assert cli.main(list(argv)) == 1
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "Traceback" not in err and 1 <= len(lines) <= 2, err
    assert lines[0].startswith("pg-kde: ") and all(line.startswith("hint: ") for line in lines[1:]), err
    return lines


def test_command_with_a_bad_connection_string(capsys):
    lines = failure(capsys, "list", "--dsn", "not a connection string")
    assert lines[0].startswith("pg-kde: invalid connection string: missing \"=\" after \"not\"")
    assert "key=value" in lines[1]


def test_command_with_a_refused_connection(capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lines = failure(capsys, "list", "--dsn", f"host=127.0.0.1 port={port} dbname=x connect_timeout=5")
    assert lines[0].startswith("pg-kde: could not connect: ") and "Connection refused" in lines[0]
    assert lines[1].startswith("hint: Is the server running")


def test_command_on_a_missing_table(capsys, database):
    for command in ("refresh", "drop"):
        lines = failure(capsys, command, "--dsn", database, "no_such_table.x")
        assert lines[0] == 'pg-kde: relation "no_such_table" does not exist'
        assert "schema.table.column" in lines[1]


def test_command_without_the_privilege(capsys, database, db, table):
    db.execute(sql.SQL("CREATE TABLE {} AS SELECT g::float8 AS x FROM generate_series(1, 100) g")
               .format(sql.Identifier(table)))
    role, password = f"kde_cli_{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    db.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(password)))
    try:
        dsn = psycopg.conninfo.make_conninfo(database, user=role, password=password)
        lines = failure(capsys, "refresh", "--dsn", dsn, f"{table}.x")
        assert lines[0].startswith("pg-kde: permission denied for column x of ") and table in lines[0]
        assert lines[1].startswith("hint: ") and "SELECT" in lines[1], lines
    finally:
        db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_command_on_a_database_without_pg_kde(capsys, database_without_pg_kde):
    dbname = psycopg.conninfo.conninfo_to_dict(database_without_pg_kde)["dbname"]
    for argv in (["list"], ["refresh", "--stale"], ["drop", "t.x"]):
        lines = failure(capsys, *argv, "--dsn", database_without_pg_kde)
        assert lines == [f"pg-kde: pg_kde is not installed in database {dbname}",
                         "hint: CREATE EXTENSION pg_kde CASCADE"]
