"""Shards on the real server: a partitioned table whose partitions are a local table and postgres_fdw
foreign tables on two other local clusters (pg_kde installed on each). kde_refresh on the parent builds the
foreign partitions where their rows live (postgres_fdw runs the sample's order statistics and the scan's
aggregate on their servers; only those travel), merges them with the local one, exactly, and repeats bit
for bit. Needs clusters of its own: skipped where the tests run on a server given from outside."""

import uuid
from pathlib import Path

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")
from psycopg import sql  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402

import pg_kde  # noqa: E402
from conftest import server_kind  # noqa: E402
from pg_kde import server  # noqa: E402
from pg_kde.synopsis.query import range_1d  # noqa: E402
from sqlhelpers import assert_exact_cells  # noqa: E402

pytestmark = pytest.mark.skipif(server_kind() != "local", reason="starts local clusters of its own (make test)")

SHARDS = 2


@pytest.fixture(scope="module")
def shards(tmp_path_factory, server_dsn):
    """SHARDS more local clusters, each with a database ``shard`` holding pg_kde: [(cluster, its DSN)]."""
    workdirs, out = [], []
    try:
        for _ in range(SHARDS):
            workdir = tmp_path_factory.mktemp("pg_kde_shard")
            workdirs.append(workdir)
            cluster = server.start(workdir)
            with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
                conn.execute("CREATE DATABASE shard")
            with psycopg.connect(cluster.dsn("shard"), autocommit=True) as conn:
                conn.execute(f"CREATE EXTENSION pg_kde VERSION '{pg_kde.__version__}' CASCADE")
            out.append((cluster, cluster.dsn("shard")))
        yield out
    finally:
        for workdir in workdirs:
            server.destroy(workdir)


def test_foreign_partitions_are_built_where_their_rows_live(db, table, shards):
    rng = np.random.default_rng(17)
    n = 12000
    amount = np.round(rng.lognormal(3.0, 1.0, 3 * n), 2)
    amount[rng.random(3 * n) < 0.05] = 9.99  # a heavy value in every part
    region = np.repeat(np.arange(3), n)  # 0 here, 1 and 2 on the shards: overlapping amounts
    db.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
    db.execute(f'CREATE TABLE "{table}" (region int, amount numeric(12,2)) PARTITION BY LIST (region)')
    db.execute(f'CREATE TABLE "{table}_0" PARTITION OF "{table}" FOR VALUES IN (0)')
    servers = []
    for k, (cluster, dsn) in enumerate(shards, start=1):
        with psycopg.connect(dsn, autocommit=True) as remote:
            remote.execute("DROP TABLE IF EXISTS part")
            remote.execute("CREATE TABLE part (region int, amount numeric(12,2))")
            with remote.cursor().copy("COPY part FROM STDIN") as cp:
                for a in amount[region == k]:
                    cp.write_row((k, float(a)))
        name = f"kde_shard_{uuid.uuid4().hex[:8]}"
        servers.append(name)
        password = Path(cluster.passfile).read_text().strip().split(":")[-1]
        db.execute(sql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host {}, port {}, "
                           "dbname 'shard', extensions 'pg_kde')").format(
            sql.Identifier(name), sql.Literal(str(cluster.base)), sql.Literal(str(cluster.port))))
        db.execute(sql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (user 'postgres', password {})")
                   .format(sql.Identifier(name), sql.Literal(password)))
        db.execute(f'CREATE FOREIGN TABLE "{table}_{k}" PARTITION OF "{table}" FOR VALUES IN ({k}) '
                   f"SERVER {name} OPTIONS (table_name 'part')")
    try:
        with db.cursor().copy(f'COPY "{table}_0" FROM STDIN') as cp:
            for a in amount[region == 0]:
                cp.write_row((0, float(a)))
        # postgres_fdw runs both reads on the shard: the scan's aggregate and the sample's order statistics
        plan = "\n".join(r[0] for r in db.execute(
            f"EXPLAIN VERBOSE SELECT count(*), _kde_cells(amount, '{{0,1}}'::float8[], '{{}}'::float8[], 0.01, 256) "
            f'FROM "{table}_1"'))
        assert "Remote SQL: SELECT count(*), public._kde_cells(amount" in plan
        plan = "\n".join(r[0] for r in db.execute(
            f"EXPLAIN VERBOSE SELECT percentile_disc('{{0,1}}'::float8[]) WITHIN GROUP (ORDER BY amount::float8) "
            f'FROM "{table}_1"'))
        assert "Remote SQL: SELECT percentile_disc(" in plan

        t = sql.Identifier(table).as_string(db)
        summary = db.execute("SELECT kde_refresh(%s::regclass, 'amount')", (t,)).fetchone()[0]
        assert (summary["partitions"], summary["rebuilt"], summary["rows"]) == (3, 3, 3 * n)
        payload = "SELECT * FROM kde_synopsis WHERE relid = %s::regclass AND cols = '{amount}'"
        with db.cursor(row_factory=dict_row) as cur:
            row = cur.execute(payload, (t,)).fetchone()
        first = db.execute("SELECT md5(p::text) FROM kde_synopsis p WHERE relid = %s::regclass", (t,)).fetchone()[0]
        # the merge is exact: cells and heavy values against the rows, hard bounds on queries
        assert 9.99 in row["atom_values"] or row["step"] == 0.01
        assert_exact_cells(row, amount)
        xs = np.sort(amount)
        errors = []
        for i in range(200):
            lo, hi = np.sort(rng.choice(xs, 2))
            truth = int(((xs >= lo) & (xs <= hi)).sum())
            r = range_1d(row, float(lo), float(hi), 0)
            assert r.low - 1e-6 <= truth <= r.high + 1e-6
            errors.append(abs(r.estimate - truth) / max(truth, 1))
        assert np.median(errors) < 0.005
        # each shard's synopsis answers on the coordinator too; a second refresh repeats the parent bit for bit
        est = db.execute(f"SELECT approx_count('\"{table}_2\"', 'amount', 10, 20)").fetchone()[0]
        truth = int(((amount[region == 2] >= 10) & (amount[region == 2] <= 20)).sum())
        assert abs(est - truth) / truth < 0.02
        summary = db.execute("SELECT kde_refresh(%s::regclass, 'amount')", (t,)).fetchone()[0]
        assert (summary["rebuilt"], summary["reused"]) == (2, 1)  # shards are always rebuilt
        assert db.execute("SELECT md5(p::text) FROM kde_synopsis p WHERE relid = %s::regclass", (t,)).fetchone()[0] == first
        # A pair: every part on the parent's cells (region is constant in each), the merge exact cell by cell
        pair = db.execute("SELECT kde_refresh(%s::regclass, ARRAY['region', 'amount'])", (t,)).fetchone()[0]
        assert (pair["partitions"], pair["rebuilt"], pair["rows"]) == (3, 3, 3 * n)
        with db.cursor(row_factory=dict_row) as cur:
            p2 = cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass", (t,)).fetchone()
        cells = np.histogram2d(region.astype(float), amount, bins=(p2["grid1"], p2["grid2"]))[0]
        sat = np.asarray(p2["sat_count"]).reshape(p2["grid_size"])
        np.testing.assert_array_equal(np.diff(np.diff(sat, axis=0), axis=1), cells)
        # (bounds off the heavy value 9.99: a 2-D synopsis keeps no heavy values, and a bound next to one
        # spreads its rows over the cut cell, a plain table's as much: 11% at 10-20)
        est = db.execute("SELECT approx_count(%s::regclass, 'region', 1, 2, 'amount', 11, 19)", (t,)).fetchone()[0]
        truth = int(((region >= 1) & (amount >= 11) & (amount <= 19)).sum())
        assert abs(est - truth) / truth < 0.05
    finally:
        db.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')
        for name in servers:
            db.execute(f"DROP SERVER IF EXISTS {name} CASCADE")
