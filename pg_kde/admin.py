"""Administration of pg_kde from Python: what the ``pg-kde`` command does, for DBAs' own scripts.

    from pg_kde import admin
    with admin.connect("host=... dbname=...") as conn:
        admin.refresh(conn, [("public.flights", "dep_delay")])
        print(admin.list_synopses(conn))

Needs psycopg 3 (``pip install 'pg_kde[admin]'``).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

SQL_DIR = Path(__file__).resolve().parent / "sql"
#: kde_refresh's named options and their SQL types: :func:`refresh` accepts only these names and casts
#: each value to its type.
REFRESH_OPTIONS = {"method": "text", "sample_size": "integer", "grid_size": "integer", "backend": "text",
                   "budget": "integer"}


class ExtensionNotInstalledError(RuntimeError):
    """pg_kde is not installed in the connected database; ``hint`` says how to install it."""

    hint = "CREATE EXTENSION pg_kde CASCADE"


def extension_files() -> list:
    """The control file and install scripts shipped with this package."""
    files = sorted(SQL_DIR.glob("pg_kde*"))
    if not any(f.suffix == ".control" for f in files):
        raise FileNotFoundError(f"pg_kde's extension files are missing from {SQL_DIR}; reinstall the package")
    return files


#: The C sources of the extension's library ($libdir/pg_kde: the refresh's sample and scan aggregates, the
#: 1-D queries' arithmetic and packed heavy values, the tracking triggers' arithmetic, the catalog's shape checks;
#: they share pg_kde.h),
#: compiled at install.
LIBRARY_SOURCES = ("atoms.c", "catalog.c", "cells.c", "cells2.c", "multi.c", "profile.c", "range.c", "sample.c",
                   "track.c")


def _pg_config(pg_config: str, option: str) -> str:
    return subprocess.run([pg_config, option], capture_output=True, text=True, check=True).stdout.strip()


def build_library(pg_config: str, dest: Path) -> Path:
    """Compile the extension's library (``pg_kde.so``) against the server headers ``pg_config`` names, with
    its compiler and flags, into ``dest``; returns the file written. The headers come with Debian's
    ``postgresql-server-dev-NN`` (the server's major version)."""
    include = Path(_pg_config(pg_config, "--includedir-server"))
    if not (include / "postgres.h").is_file():
        version = _pg_config(pg_config, "--version").split()[-1].split(".")[0]
        raise FileNotFoundError(f"PostgreSQL's server headers are missing ({include}/postgres.h); install them, e.g. "
                                f"apt-get install postgresql-server-dev-{version}")
    cc = shlex.split(_pg_config(pg_config, "--cc")) or ["cc"]
    flags = [*shlex.split(_pg_config(pg_config, "--cflags")), *shlex.split(_pg_config(pg_config, "--cflags_sl")),
             *shlex.split(_pg_config(pg_config, "--cppflags")), f"-I{include}",
             # no fused multiply-adds: the queries' arithmetic rounds as its float64 reference does, step for step
             "-ffp-contract=off"]
    out = dest / "pg_kde.so"
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / "pg_kde.so"
        command = [*cc, *flags, "-shared", "-o", str(built), *(str(SQL_DIR / s) for s in LIBRARY_SOURCES),
                   *shlex.split(_pg_config(pg_config, "--ldflags_sl"))]
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"compiling pg_kde's library failed:\n{' '.join(command)}\n{run.stderr}")
        # Replaced, not overwritten in place: a running server may have the old file mapped.
        staged = dest / ".pg_kde.so.new"
        shutil.copy2(built, staged)
        staged.replace(out)
    return out


def install(pg_config: str = "pg_config") -> Path:
    """Copy the extension files into the server found by ``pg_config`` (its SHAREDIR/extension) and compile
    its library into PKGLIBDIR (:func:`build_library`).

    The server's PL/Python must also import this package and numpy/scipy; see the README, "Install into
    your server". Returns the directory the SQL files were written to.
    """
    if shutil.which(pg_config) is None and not Path(pg_config).exists():
        raise FileNotFoundError(f"pg_config not found ({pg_config!r}); pass --pg-config /path/to/pg_config")
    build_library(pg_config, Path(_pg_config(pg_config, "--pkglibdir")))
    dest = Path(_pg_config(pg_config, "--sharedir")) / "extension"
    for f in extension_files():
        shutil.copy2(f, dest / f.name)
    return dest


def connect(dsn: str, **kwargs):
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the admin/test extras install it
        raise RuntimeError("pg_kde.admin needs psycopg 3: pip install 'pg_kde[admin]'") from exc
    return psycopg.connect(dsn, autocommit=True, **kwargs)


def extension_schema(conn) -> str:
    """The schema pg_kde is installed in; ExtensionNotInstalledError when it is not installed.

    Every statement of this module names that schema and casts its arguments to the parameters' types,
    so no function, view or operator another role put in a schema on the connection's search_path (an
    overload of kde_refresh taking integers, say) is called instead of pg_kde's."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n "
        "ON n.oid OPERATOR(pg_catalog.=) e.extnamespace WHERE e.extname OPERATOR(pg_catalog.=) 'pg_kde'"
    ).fetchone()
    if row is None:
        raise ExtensionNotInstalledError(f"pg_kde is not installed in database {conn.info.dbname}")
    return row[0]


#: PostgreSQL's longest identifier, in bytes (NAMEDATALEN - 1): a longer name is cut to it, as the server
#: cuts the names it reads.
MAX_IDENTIFIER_BYTES = 63

#: What ends an unquoted name in a target: whitespace (the characters PostgreSQL's scanner takes for it), the
#: separators and a double quote.
_SPACE = " \t\n\r\f\v"
_TARGET_DELIMITERS = _SPACE + '.,"'
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class TargetError(ValueError):
    """A TABLE.COLUMN target that cannot be read; ``str(exc)`` says what is wrong, ``hint`` how targets are
    written."""

    hint = ('a target is TABLE.COLUMN, SCHEMA.TABLE.COLUMN or TABLE.COLUMN1,COLUMN2[,...] (2 to 16 columns); '
            'names follow SQL: unquoted ones are folded to lower case, "Quoted" ones are taken as written and may '
            'hold spaces, dots, commas and capitals ("" for a " inside)')


def _target_names(text: str) -> list:
    """The names and separators of a target, in order: ``(name, start)`` for a name (its value, the offset it
    starts at) and ``(".", offset)`` or ``(",", offset)`` for a separator outside double quotes.

    The rules are PostgreSQL's for the text of a ``regclass``, the table part's (so the columns read as the
    table does), with the comma a separator too: a double-quoted name is taken literally (``""`` is a double
    quote inside it) and may hold dots, commas and spaces; an unquoted one runs to the next whitespace, dot,
    comma or double quote and is folded to lower case (ASCII letters, as the server folds them in UTF-8);
    either is cut to 63 bytes. Whitespace around names is ignored."""
    tokens, i, n = [], 0, len(text)
    expect_name = True
    while True:
        while i < n and text[i] in _SPACE:
            i += 1
        if i == n:
            if expect_name:
                where = "" if not tokens else f" after the last {tokens[-1][0]!r}"
                raise TargetError(f"a name is missing{where} in {text!r}")
            return tokens
        start = i
        if not expect_name:
            if text[i] not in ".,":
                raise TargetError(f"unexpected {text[i:]!r} after the name {tokens[-1][0]!r} in {text!r}; a name "
                                  "holding spaces or double quotes is written in double quotes")
            tokens.append((text[i], i))
            i += 1
            expect_name = True
            continue
        if text[i] == '"':
            name, i = [], i + 1
            while True:
                close = text.find('"', i)
                if close < 0:
                    raise TargetError(f"unterminated double quote in {text!r}")
                name.append(text[i:close])
                if text.startswith('"', close + 1):  # "" is a double quote inside the name
                    name.append('"')
                    i = close + 2
                    continue
                i = close + 1
                break
            name = "".join(name)
            if not name:
                raise TargetError(f'an empty quoted name ("") in {text!r}')
        else:
            while i < n and text[i] not in _TARGET_DELIMITERS:
                i += 1
            if i == start:
                raise TargetError(f"a name is missing before the {text[i]!r} at offset {i} of {text!r}")
            name = text[start:i].translate(_ASCII_LOWER)
        # The server's cut: whole characters, to at most MAX_IDENTIFIER_BYTES bytes of UTF-8.
        name = name.encode()[:MAX_IDENTIFIER_BYTES].decode(errors="ignore")
        tokens.append((name, start))
        expect_name = False


def parse_target(text: str):
    """'schema.table.column' or 'table.column' -> ('schema.table' or 'table', 'column'); a pair or up to 16
    columns 'table.a,b,c' -> ('table', ['a', 'b', 'c']).

    Table and columns follow PostgreSQL's rules for names (see :func:`_target_names`): ``"My Col"`` is the
    column ``My Col``, ``My_Col`` the column ``my_col``; a quoted name may hold dots and commas
    (``t."a.b"``, ``t."c,d"``). The last dot outside double quotes ends the table, which is returned as
    written (the server reads it as a ``regclass``); commas outside double quotes after it separate the
    columns, which are returned as the names they denote."""
    tokens = _target_names(text)
    dots = [k for k, (token, _) in enumerate(tokens) if k % 2 and token == "."]
    if not dots:
        raise TargetError(f"expected TABLE.COLUMN or TABLE.COLUMN1,COLUMN2[,...], got {text!r}")
    split = dots[-1]
    if any(token == "," for token, _ in tokens[1:split:2]):
        raise TargetError(f"a comma before the table's last dot in {text!r}: commas separate the columns after "
                          "it; a name holding a comma is written in double quotes")
    table = text[:tokens[split][1]].strip()
    columns = [name for name, _ in tokens[split + 1::2]]
    if len(columns) == 1:
        return table, columns[0]
    if len(columns) > 16:
        raise TargetError(f"several columns are TABLE.COLUMN1,COLUMN2[,...] (2 to 16 of them), got {text!r}")
    return table, columns


def quote_name(name: str) -> str:
    """``name`` as a target writes it: as it is when :func:`parse_target` reads it back unchanged, else in
    double quotes (``""`` for a double quote inside)."""
    if name and not any(c in _TARGET_DELIMITERS for c in name) and name == name.translate(_ASCII_LOWER):
        return name
    return '"' + name.replace('"', '""') + '"'


def format_target(table: str, column) -> str:
    """The target text of (table, column or list of columns), as :func:`parse_target` reads it back: for
    progress lines and messages."""
    columns = column if isinstance(column, list) else [column]
    return f"{table}.{','.join(map(quote_name, columns))}"


def progress_bar(i: int, total: int, target: str, seconds: float, *, width: int = 30, indent: str = "",
                 stream=None) -> None:
    """Progress on ``stream`` (default stderr); fits :func:`refresh`'s ``progress``. On a terminal, a one-line
    bar redrawn in place (ended by a newline after the last target); elsewhere (a file, a pipe, a CI log), a
    plain line per target, with no carriage returns or terminal escape codes to garble the log."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        stream.write(f"{indent}{i}/{total} {target} ({seconds:.2f} s)\n")
        stream.flush()
        return
    done = width * i // total
    stream.write(f"\r{indent}[{'#' * done}{'.' * (width - done)}] {i}/{total} {target} ({seconds:.2f} s)\033[K")
    if i == total:
        stream.write("\n")
    stream.flush()


def _sql():
    from psycopg import sql  # psycopg is there: the caller passed one of its connections

    return sql


def refresh(conn, targets: Iterable, progress: Optional[Callable] = None, **options) -> list:
    """kde_refresh each (table, column), one transaction each; ``progress(i, total, target, seconds)``
    is called after each. Options are kde_refresh's named arguments (:data:`REFRESH_OPTIONS`: method,
    sample_size, grid_size, backend, budget); another name is a ValueError. Returns the summaries.

    A failure stops at that target and raises; the targets before it stay refreshed (committed). To see
    each summary as it lands, use :func:`refresh_iter`."""
    return list(refresh_iter(conn, targets, progress, **options))


def refresh_iter(conn, targets: Iterable, progress: Optional[Callable] = None, **options) -> Iterator:
    """:func:`refresh`, yielding each target's summary as soon as its transaction has committed, so a caller
    can report what landed before a later target fails. The options and the extension are checked at the
    call, before anything is yielded."""
    unknown = sorted(set(options) - set(REFRESH_OPTIONS))
    if unknown:
        raise ValueError(f"unknown kde_refresh option {', '.join(map(repr, unknown))}; "
                         f"valid options: {', '.join(REFRESH_OPTIONS)}")
    sql = _sql()
    function = sql.Identifier(extension_schema(conn), "kde_refresh")
    named = [sql.SQL("{} => {}::{}").format(sql.Identifier(name), sql.Placeholder(name),
                                            sql.SQL(REFRESH_OPTIONS[name])) for name in options]
    targets = list(targets)

    def each():
        for i, (table, column) in enumerate(targets, 1):
            started = time.perf_counter()
            column_argument = "%(column)s::text[]" if isinstance(column, list) else "%(column)s::text"
            arguments = [sql.SQL("%(table)s::regclass"), sql.SQL(column_argument), *named]
            query = sql.SQL("SELECT {}({})").format(function, sql.SQL(", ").join(arguments))
            with conn.transaction():
                summary = conn.execute(query, {"table": table, "column": column, **options}).fetchone()[0]
            if progress:
                progress(i, len(targets), format_target(table, column), time.perf_counter() - started)
            yield summary

    return each()


def refresh_stale(conn) -> int:
    """kde_refresh_stale(): refresh every stale synopsis the role may refresh; returns how many."""
    sql = _sql()
    query = sql.SQL("SELECT {}()").format(sql.Identifier(extension_schema(conn), "kde_refresh_stale"))
    return conn.execute(query).fetchone()[0]


def list_synopses(conn) -> list:
    """The rows of the kde_synopses view (one dict per synopsis the role may read), by relation."""
    sql = _sql()
    query = sql.SQL(
        "SELECT relid::text AS relation, cols, method, n_rows, heavy_values, kde_rows, bytes, "
        "pg_catalog.round(extract(epoch FROM age)::numeric, 1) AS age_s, rows_modified, stale FROM {} "
        "ORDER BY relid::text, cols"
    ).format(sql.Identifier(extension_schema(conn), "kde_synopses"))
    cur = conn.execute(query)
    cols = [d.name for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]


def drop(conn, table: str, column) -> bool:
    """Delete the synopsis of (table, column), or of several columns given as a list (in any order); False if
    there was none."""
    sql = _sql()
    schema = extension_schema(conn)
    # OPERATOR(pg_catalog.=): an "=" for (regclass, regclass) or (text[], text[]) in a schema on the
    # search_path would match exactly and be chosen over pg_catalog's.
    # One header table for every kind: the payload row goes with its header (ON DELETE CASCADE).
    if isinstance(column, list):  # the columns in any order
        query = sql.SQL(
            "DELETE FROM {} WHERE relid OPERATOR(pg_catalog.=) %s::regclass "
            "AND cols OPERATOR(pg_catalog.@>) %s::text[] AND cols OPERATOR(pg_catalog.<@) %s::text[] "
            "AND pg_catalog.cardinality(cols) OPERATOR(pg_catalog.=) %s"
        ).format(sql.Identifier(schema, "kde_catalog"))
        cur = conn.execute(query, (table, column, column, len(column)))
    else:
        query = sql.SQL(
            "DELETE FROM {} WHERE relid OPERATOR(pg_catalog.=) %s::regclass "
            "AND cols OPERATOR(pg_catalog.=) ARRAY[%s::text]"
        ).format(sql.Identifier(schema, "kde_catalog"))
        cur = conn.execute(query, (table, column))
    return cur.rowcount > 0
