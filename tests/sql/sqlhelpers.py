"""Helpers of the SQL tests: load arrays into a table, refresh, approximate and exact answers."""

import numpy as np
from psycopg import sql


def load(conn, table, columns: dict, types=None):
    """Create ``table`` with float8 (or given) columns and COPY the arrays in (NaN -> NULL)."""
    types = types or {}
    conn.execute(
        sql.SQL("CREATE TABLE {} ({})").format(
            sql.Identifier(table),
            sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(types.get(c, "float8"))) for c in columns),
        )
    )
    names = list(columns)
    with conn.cursor().copy(
        sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, names)))
    ) as cp:
        for row in zip(*(np.asarray(columns[c]).tolist() for c in names)):
            cp.write_row([None if (isinstance(v, float) and v != v) else v for v in row])


def refresh(conn, table, col, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    return conn.execute(
        f"SELECT kde_refresh(%(t)s::regclass, %(c)s{args})", {"t": sql.Identifier(table).as_string(conn), "c": col, **kw}
    ).fetchone()[0]


def approx(conn, fn, table, col, lo, hi):
    return conn.execute(f"SELECT {fn}(%s::regclass, %s, %s, %s)", (sql.Identifier(table).as_string(conn), col, lo, hi)).fetchone()[0]


def exact(conn, agg, table, col, lo, hi):
    q = sql.SQL("SELECT {}({}) FROM {} WHERE {} BETWEEN %s AND %s").format(
        sql.SQL(agg), sql.Identifier(col), sql.Identifier(table), sql.Identifier(col)
    )
    v = conn.execute(q, (lo, hi)).fetchone()[0]
    return float(v) if v is not None else 0.0
