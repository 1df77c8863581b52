"""Helpers of the SQL tests: load arrays into a table, refresh, approximate and exact answers."""

import contextlib
import subprocess
import uuid

import numpy as np
import psycopg
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


def assert_exact_cells(row: dict, x):
    """A 1-D payload (a kde_synopsis row) holds exactly the values x: each heavy value's rows, and each
    cell's rows (width_bucket's rule, values beyond the grid in the outer cells) and sum. Heavy values are
    read as stored: arrays, or a pack (0.9.0)."""
    from pg_kde.synopsis.query import heavy_values

    x = np.asarray(x, dtype=float)
    values, counts, sums = heavy_values(row)
    atoms = np.asarray(values, dtype=float)
    np.testing.assert_array_equal(np.cumsum([(x == a).sum() for a in atoms]), counts)
    np.testing.assert_allclose(sums, np.cumsum([x[x == a].sum() for a in atoms]), rtol=1e-12)
    rest = x[~np.isin(x, atoms)]
    if not row["grid"]:
        assert len(rest) == 0
        return
    g = np.asarray(row["grid"])
    assert g[0] <= rest.min() and rest.max() <= g[-1]
    c = np.clip(np.searchsorted(g, rest, side="right") - 1, 0, len(g) - 2)
    np.testing.assert_array_equal(np.concatenate([[0], np.cumsum(np.bincount(c, minlength=len(g) - 1))]),
                                  row["cell_cum_count"])
    sums = np.concatenate([[0.0], np.cumsum(np.bincount(c, weights=rest, minlength=len(g) - 1))])
    np.testing.assert_allclose(row["cell_cum_sum"], sums, rtol=1e-9, atol=1e-6)
    assert row["kde_rows"] == len(rest)


@contextlib.contextmanager
def restored_copy(server_dsn, database):
    """The DSN of a new database restored from ``pg_dump --format=custom`` of ``database``; dropped after."""
    target = f"pg_kde_restore_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {target}")
    try:
        dump = subprocess.run(["pg_dump", "--format=custom", f"--dbname={database}"], capture_output=True, check=True)
        restored = psycopg.conninfo.make_conninfo(database, dbname=target)
        subprocess.run(["pg_restore", f"--dbname={restored}"], input=dump.stdout, capture_output=True, check=True)
        yield restored
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {target} WITH (FORCE)")


def varint_pack(pack: bytes, step: float) -> bytes:
    """The format-1 pack (varints: n, k₀ zigzag-coded, c₀, then each step and count) of a pack's values: the
    heavy values as releases 0.9.0 to 0.30.0 stored them."""
    from pg_kde.synopsis.packing import _put, lattice_indices, unpack_atoms

    values, cum, _, _ = unpack_atoms(pack, step, index_sums=True)
    ks = lattice_indices(values, step)
    counts = np.diff([0.0] + cum).astype(np.int64).tolist()
    out = bytearray([1])
    for x in (len(ks), 2 * ks[0] if ks[0] >= 0 else -2 * ks[0] - 1, counts[0]):
        _put(out, x)
    for i in range(1, len(ks)):
        _put(out, ks[i] - ks[i - 1])
        _put(out, counts[i])
    return bytes(out)
