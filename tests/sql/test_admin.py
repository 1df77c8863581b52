"""pg_kde.admin on a real PostgreSQL: it calls pg_kde's functions whatever the connection's search_path
holds, and puts only known option names into SQL."""

import numpy as np
import psycopg
import pytest
from psycopg import sql

from pg_kde import admin

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


def test_a_database_without_pg_kde_is_a_clear_error(server_dsn):
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        if conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pg_kde'").fetchone()[0]:
            pytest.skip("pg_kde is installed in the maintenance database")
        dbname = conn.info.dbname
        for call in (admin.list_synopses, admin.refresh_stale, lambda c: admin.refresh(c, [("t", "x")])):
            with pytest.raises(admin.ExtensionNotInstalledError, match=f"not installed in database {dbname}"):
                call(conn)
