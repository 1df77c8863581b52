"""pg_kde.admin and the pg-kde command on a real PostgreSQL: admin calls pg_kde's functions whatever the
connection's search_path holds and puts only known option names into SQL; the command's failures are a
line a person can act on, never a traceback."""

import io
import json
import re
import socket
import sys
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


class TtyStream(io.StringIO):
    """A stream that says it is a terminal, as stderr does in a person's shell."""

    def isatty(self):
        return True


def test_targets_read_names_as_sql_does():
    """The column part follows the table part's rules: quoted names are literal (dots and commas too),
    unquoted ones are folded to lower case; commas outside quotes separate columns."""
    cases = {
        '"We""ird T"."My Col"': ('"We""ird T"', "My Col"),
        't."a.b"': ("t", "a.b"),
        't."c,d"': ("t", "c,d"),
        't."c,d",e': ("t", ["c,d", "e"]),
        'Public.T.Amount': ("Public.T", "amount"),  # the table is the server's to fold (regclass)
        't."Q""uote"': ("t", 'Q"uote'),
        "s.t.a, b,c,k": ("s.t", ["a", "b", "c", "k"]),
        '"x.y".col': ('"x.y"', "col"),
        "t . x": ("t", "x"),
        "t." + "é" * 40: ("t", "é" * 31),  # cut to 63 bytes, whole characters, as the server cuts names
    }
    for text, expected in cases.items():
        assert admin.parse_target(text) == expected, text
    errors = {
        "nodot": "expected TABLE.COLUMN",
        "t.my col": "unexpected 'col' after the name 'my'",
        "t.": "a name is missing after the last '.'",
        "t.a,": "a name is missing after the last ','",
        "t..x": "a name is missing before the '.'",
        't."ab': "unterminated double quote",
        't.""': "empty quoted name",
        't."a"b': "unexpected 'b' after the name 'a'",
        "a,b.c": "a comma before the table's last dot",
        "t." + ",".join(f"c{i}" for i in range(17)): "2 to 16",
    }
    for text, message in errors.items():
        with pytest.raises(admin.TargetError, match=re.escape(message)) as err:
            admin.parse_target(text)
        assert isinstance(err.value, ValueError) and '"Quoted"' in err.value.hint
    for table, column in [("t", "x"), ('"T"', ["My Col", "a.b", "c,d", 'q"q', "ok"])]:
        assert admin.parse_target(admin.format_target(table, column)) == (table, column)


def test_command_refreshes_and_drops_columns_with_quoted_names(capsys, database, db):
    table = f'We"ird T {uuid.uuid4().hex[:8]}'
    quoted = '"' + table.replace('"', '""') + '"'
    db.execute(sql.SQL('CREATE TABLE {} AS SELECT g::float8 AS "My Col", sin(g)::float8 AS "a.b", '
                       'cos(g)::float8 AS "c,d", g::float8 AS x FROM generate_series(1, 300) g')
               .format(sql.Identifier(table)))
    try:
        targets = [f'{quoted}."My Col"', f'{quoted}."a.b"', f'{quoted}."c,d"', f'{quoted}."My Col","c,d"',
                   f"{quoted}.X"]
        assert cli.main(["refresh", "--dsn", database, *targets]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert [json.loads(line)["rows"] for line in out.splitlines()] == [300] * 5
        cols = db.execute("SELECT cols FROM kde_catalog WHERE relid = %s::regclass ORDER BY cols",
                          (quoted,)).fetchall()
        assert sorted(c for (c,) in cols) == [["My Col"], ["My Col", "c,d"], ["a.b"], ["c,d"], ["x"]]
        assert cli.main(["drop", "--dsn", database, f'{quoted}."c,d","My Col"', f'{quoted}."a.b"']) == 0
        assert capsys.readouterr().out.splitlines() == [f'{quoted}."c,d","My Col" dropped', f'{quoted}."a.b" dropped']
        cols = db.execute("SELECT cols FROM kde_catalog WHERE relid = %s::regclass ORDER BY cols",
                          (quoted,)).fetchall()
        assert sorted(c for (c,) in cols) == [["My Col"], ["c,d"], ["x"]]
        # A target that cannot be read changes nothing, even after readable ones.
        lines = failure(capsys, "drop", "--dsn", database, f'{quoted}."My Col"', f"{quoted}.my col")
        assert lines[0].startswith("pg-kde: unexpected 'col' after the name 'my'") and "TABLE.COLUMN" in lines[1]
        assert db.execute("SELECT count(*) FROM kde_catalog WHERE relid = %s::regclass", (quoted,)).fetchone() == (3,)
    finally:
        db.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))


@pytest.mark.parametrize("terminal", [False, True])
def test_a_refresh_failing_part_way_says_what_was_refreshed(capsys, monkeypatch, database, db, table, terminal):
    db.execute(sql.SQL("CREATE TABLE {} AS SELECT g::float8 AS x, g::float8 AS y FROM generate_series(1, 200) g")
               .format(sql.Identifier(table)))
    stderr = TtyStream() if terminal else None
    if terminal:
        monkeypatch.setattr(sys, "stderr", stderr)
    assert cli.main(["refresh", "--dsn", database, f"{table}.x", f"{table}.nosuch", f"{table}.y"]) == 1
    out, err = capsys.readouterr()
    err = stderr.getvalue() if terminal else err
    (summary,) = [json.loads(line) for line in out.splitlines()]  # the one that landed, printed as it did
    assert summary["column"] == "x" and summary["rows"] == 200
    lines = [line for line in err.splitlines() if line.startswith(("pg-kde: ", "hint: ", "note: "))]
    assert lines[0].startswith("pg-kde: column nosuch of relation ") and table in lines[0], err
    assert lines[-1] == (f"note: refreshed before the failure (committed, one transaction each): {table}.x; "
                         f"not refreshed: {table}.nosuch, {table}.y")
    assert "\npg-kde: " in "\n" + err  # on a line of its own, after the progress
    if terminal:
        assert f"\r[##########....................] 1/3 {table}.x" in err
    else:
        assert "\r" not in err and "\033" not in err
    cols = db.execute("SELECT cols FROM kde_catalog WHERE relid = %s::regclass", (table,)).fetchall()
    assert cols == [(["x"],)]


@pytest.mark.parametrize("argv", [["--stale", "t.x"], ["t.x", "--stale"], ["--stale", "--method", "plugin"],
                                  ["--stale", "--budget", "4096"], []])
def test_refresh_usage_errors_exit_2_before_connecting(capsys, argv):
    # No server listens there: a usage error is found before any connection is tried.
    with pytest.raises(SystemExit) as exit_:
        cli.main(["refresh", "--dsn", "host=/nonexistent port=1 dbname=x", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: pg-kde refresh"), err
    if argv:
        assert "--stale refreshes every stale synopsis" in err and "takes no targets or options" in err
    else:
        assert "refresh needs TABLE.COLUMN targets or --stale" in err


def test_help_says_what_the_exit_status_means(capsys):
    assert "1 when it failed" in cli.__doc__ and "2 when the command line itself is wrong" in cli.__doc__
    for argv in (["--help"], ["refresh", "--help"], ["server", "--help"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 0
        out = capsys.readouterr().out
        assert "exit status:\n  0  done\n  1  the command failed" in out and "\n  2  the command line is wrong" in out
    with pytest.raises(SystemExit):
        cli.main(["refresh", "--help"])
    assert '"double-quoted" one is taken as written' in capsys.readouterr().out


def test_progress_is_plain_lines_unless_on_a_terminal(capsys):
    for i in (1, 2):
        admin.progress_bar(i, 2, "t.x", 0.25)
    assert capsys.readouterr().err == "1/2 t.x (0.25 s)\n2/2 t.x (0.25 s)\n"
    terminal = TtyStream()
    for i in (1, 2):
        admin.progress_bar(i, 2, "t.x", 0.25, width=4, stream=terminal)
    assert terminal.getvalue() == "\r[##..] 1/2 t.x (0.25 s)\033[K\r[####] 2/2 t.x (0.25 s)\033[K\n"


@pytest.mark.parametrize("action", ["stop", "status", "destroy"])
def test_server_actions_on_a_missing_directory_name_it(capsys, tmp_path, action):
    missing = tmp_path / "no" / "such"
    lines = failure(capsys, "server", action, "--dir", str(missing))
    assert lines == [f"pg-kde: no directory {missing} (--dir): no local server was started there",
                     "hint: check the path; pg-kde server start --dir DIR makes the directory"]
    assert not missing.parent.exists()
    afile = tmp_path / "file"
    afile.write_text("")
    lines = failure(capsys, "server", action, "--dir", str(afile))
    assert lines[0] == f"pg-kde: --dir {afile} is not a directory"


@pytest.mark.local_cluster
def test_server_start_makes_a_missing_directory(capsys, tmp_path):
    workdir = tmp_path / "new" / "dir"
    try:
        assert cli.main(["server", "start", "--dir", str(workdir)]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out.splitlines()
        assert out[0] == f"made the directory {workdir}" and out[1].startswith("running; connect with: psql ")
        assert cli.main(["server", "status", "--dir", str(workdir)]) == 0
        assert json.loads(capsys.readouterr().out)["running"] is True
    finally:
        assert cli.main(["server", "destroy", "--dir", str(workdir)]) == 0
