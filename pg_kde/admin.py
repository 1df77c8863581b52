"""Administration of pg_kde from Python: what the ``pg-kde`` command does, for DBAs' own scripts.

    from pg_kde import admin
    with admin.connect("host=... dbname=...") as conn:
        admin.refresh(conn, [("public.flights", "dep_delay")])
        print(admin.list_synopses(conn))

Needs psycopg 3 (``pip install 'pg_kde[admin]'``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

SQL_DIR = Path(__file__).resolve().parent / "sql"


def extension_files() -> list:
    """The control file and install scripts shipped with this package."""
    files = sorted(SQL_DIR.glob("pg_kde*"))
    if not any(f.suffix == ".control" for f in files):
        raise FileNotFoundError(f"pg_kde's extension files are missing from {SQL_DIR}; reinstall the package")
    return files


def install(pg_config: str = "pg_config") -> Path:
    """Copy the extension files into the server found by ``pg_config`` (its SHAREDIR/extension).

    The server's PL/Python must also import this package and numpy/scipy; see the README, "Install into
    your server". Returns the directory written.
    """
    if shutil.which(pg_config) is None and not Path(pg_config).exists():
        raise FileNotFoundError(f"pg_config not found ({pg_config!r}); pass --pg-config /path/to/pg_config")
    out = subprocess.run([pg_config, "--sharedir"], capture_output=True, text=True, check=True)
    dest = Path(out.stdout.strip()) / "extension"
    for f in extension_files():
        shutil.copy2(f, dest / f.name)
    return dest


def connect(dsn: str, **kwargs):
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the admin/test extras install it
        raise RuntimeError("pg_kde.admin needs psycopg 3: pip install 'pg_kde[admin]'") from exc
    return psycopg.connect(dsn, autocommit=True, **kwargs)


def parse_target(text: str):
    """'schema.table.column' or 'table.column' -> ('schema.table' or 'table', 'column'); a pair of
    columns 'table.a,b' -> ('table', ['a', 'b'])."""
    table, sep, column = text.rpartition(".")
    if not sep or not table or not column:
        raise ValueError(f"expected TABLE.COLUMN or TABLE.COLUMN1,COLUMN2, got {text!r}")
    if "," in column:
        pair = [c.strip() for c in column.split(",")]
        if len(pair) != 2 or not all(pair):
            raise ValueError(f"a pair of columns is TABLE.COLUMN1,COLUMN2, got {text!r}")
        return table, pair
    return table, column


def progress_bar(i: int, total: int, target: str, seconds: float, *, width: int = 30, indent: str = "") -> None:
    """A one-line progress bar on stderr, redrawn in place; fits :func:`refresh`'s ``progress``."""
    done = width * i // total
    sys.stderr.write(f"\r{indent}[{'#' * done}{'.' * (width - done)}] {i}/{total} {target} ({seconds:.2f} s)\033[K")
    if i == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def refresh(conn, targets: Iterable, progress: Optional[Callable] = None, **options) -> list:
    """kde_refresh each (table, column), one transaction each; ``progress(i, total, target, seconds)``
    is called after each. Options are kde_refresh's named arguments (method, sample_size, grid_size,
    backend). Returns the summaries."""
    targets = list(targets)
    names = ", ".join(f"{k} => %({k})s" for k in options)
    summaries = []
    for i, (table, column) in enumerate(targets, 1):
        started = time.perf_counter()
        cast = "::text[]" if isinstance(column, list) else "::text"
        sql = f"SELECT kde_refresh(%(table)s::regclass, %(column)s{cast}" + (", " + names if names else "") + ")"
        with conn.transaction():
            summaries.append(conn.execute(sql, {"table": table, "column": column, **options}).fetchone()[0])
        if progress:
            name = ",".join(column) if isinstance(column, list) else column
            progress(i, len(targets), f"{table}.{name}", time.perf_counter() - started)
    return summaries


def refresh_stale(conn) -> int:
    return conn.execute("SELECT kde_refresh_stale()").fetchone()[0]


def list_synopses(conn) -> list:
    cur = conn.execute(
        "SELECT relid::text AS relation, cols, method, n_rows, heavy_values, kde_rows, bytes, "
        "round(extract(epoch FROM age)::numeric, 1) AS age_s, rows_modified, stale FROM kde_synopses "
        "ORDER BY relid::text, cols"
    )
    cols = [d.name for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]


def drop(conn, table: str, column) -> bool:
    """Delete the synopsis of (table, column), or of a pair given as a list; False if there was none."""
    if isinstance(column, list):
        cur = conn.execute(
            "DELETE FROM kde_synopsis_2d WHERE relid = %s::regclass AND cols IN (%s::text[], %s::text[])",
            (table, column, column[::-1]),
        )
    else:
        cur = conn.execute(
            "DELETE FROM kde_synopsis WHERE relid = %s::regclass AND cols = ARRAY[%s]::text[]", (table, column)
        )
    return cur.rowcount > 0
