"""A Citus distributed table on a real Citus cluster (a coordinator and workers, $PG_KDE_CITUS_DSN; `make
citus-test` builds Citus and starts one): kde_refresh runs the scan's aggregate on every shard (Citus's
worker_partial_agg, combined on the coordinator), the synopsis' cells are exact, its hard bounds hold and a
second refresh repeats it bit for bit. Skipped without a coordinator."""

import os
import time
import uuid

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")
from psycopg.rows import dict_row  # noqa: E402

import pg_kde  # noqa: E402
from pg_kde.synopsis.cells import make_profile, period_counts  # noqa: E402
from pg_kde.synopsis.query import range_1d  # noqa: E402
from sqlhelpers import assert_exact_cells  # noqa: E402

pytestmark = pytest.mark.citus


@pytest.fixture
def citus():
    dsn = os.environ.get("PG_KDE_CITUS_DSN")
    if not dsn:
        pytest.skip("no Citus coordinator: set PG_KDE_CITUS_DSN (make citus-test starts one)")
    try:
        conn = psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError as exc:
        pytest.skip(f"the Citus coordinator at PG_KDE_CITUS_DSN does not answer: {exc}")
    with conn:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is None:
            pytest.skip("PG_KDE_CITUS_DSN names a database without the citus extension")
        installed = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_kde'").fetchone()
        if installed is None:
            conn.execute(f"CREATE EXTENSION pg_kde VERSION '{pg_kde.__version__}' CASCADE")
        elif installed[0] != pg_kde.__version__:
            conn.execute(f"ALTER EXTENSION pg_kde UPDATE TO '{pg_kde.__version__}'")
        yield conn


def test_a_distributed_table_is_scanned_on_its_shards(citus):
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    citus.execute(f"CREATE TABLE {table} (id bigint, amount numeric(12,2))")
    try:
        citus.execute(f"SELECT create_distributed_table('{table}', 'id')")
        citus.execute("SELECT setseed(0.7)")
        citus.execute(f"INSERT INTO {table} SELECT g, round(exp(3 + sqrt(-2 * ln(1 - random())) "
                      f"* cos(2 * pi() * random()))::numeric, 2) FROM generate_series(1, 200000) g")
        plan = "\n".join(r[0] for r in citus.execute(
            f"EXPLAIN VERBOSE SELECT count(*), _kde_cells(amount, '{{0,10}}'::float8[], '{{}}'::float8[], 0.01, 256) "
            f"FROM {table}"))
        assert "worker_partial_agg" in plan and "_kde_cells" in plan  # each shard runs the scan
        summary = citus.execute(f"SELECT kde_refresh('{table}', 'amount')").fetchone()[0]
        assert summary["rows"] == 200000 and summary["step"] == 0.01
        with citus.cursor(row_factory=dict_row) as cur:
            row = cur.execute("SELECT * FROM kde_synopsis WHERE relid = %s::regclass", (table,)).fetchone()
        first = citus.execute("SELECT md5(p::text) FROM kde_synopsis p WHERE relid = %s::regclass",
                              (table,)).fetchone()[0]
        x = np.array([r[0] for r in citus.execute(f"SELECT amount::float8 FROM {table}")], dtype=float)
        assert_exact_cells(row, x)
        rng = np.random.default_rng(3)
        xs = np.sort(x)
        for _ in range(200):
            lo, hi = np.sort(rng.choice(xs, 2))
            truth = int(((xs >= lo) & (xs <= hi)).sum())
            r = range_1d(row, float(lo), float(hi), 0)
            assert r.low - 1e-6 <= truth <= r.high + 1e-6
        est = citus.execute(f"SELECT approx_count('{table}', 'amount', 10, 20)").fetchone()[0]
        truth = int(((x >= 10) & (x <= 20)).sum())
        assert abs(est - truth) / truth < 0.002
        citus.execute(f"SELECT kde_refresh('{table}', 'amount')")
        assert citus.execute("SELECT md5(p::text) FROM kde_synopsis p WHERE relid = %s::regclass",
                             (table,)).fetchone()[0] == first
    finally:
        citus.execute(f"DROP TABLE IF EXISTS {table}")


def test_a_distributed_table_s_pair_is_scanned_on_its_shards(citus):
    """A pair of a distributed table: _kde_cells2 runs on every shard (worker_partial_agg), the cells and the
    total are exact, and a second refresh repeats the synopsis bit for bit."""
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    citus.execute(f"CREATE TABLE {table} (id bigint, amount numeric(12,2), qty integer)")
    try:
        citus.execute(f"SELECT create_distributed_table('{table}', 'id')")
        citus.execute("SELECT setseed(0.3)")
        citus.execute(f"INSERT INTO {table} SELECT g, round((20 + 10 * random() + g % 7)::numeric, 2), g % 50 "
                      f"FROM generate_series(1, 100000) g")
        plan = "\n".join(r[0] for r in citus.execute(
            f"EXPLAIN VERBOSE SELECT _kde_cells2(_kde_value(amount), _kde_value(qty::float8), '{{0,100}}'::float8[], "
            f"'{{0,100}}'::float8[], 1::float8, 1::float8, NULL::tid, NULL::oid, NULL::float8, NULL::int8) FROM {table}"))
        assert "worker_partial_agg" in plan and "_kde_cells2" in plan  # each shard runs the scan
        summary = citus.execute(f"SELECT kde_refresh('{table}', ARRAY['amount', 'qty'])").fetchone()[0]
        assert summary["rows"] == 100000
        md5 = f"SELECT md5(p::text) FROM kde_synopsis_2d p WHERE relid = '{table}'::regclass"
        first = citus.execute(md5).fetchone()[0]
        with citus.cursor(row_factory=dict_row) as cur:
            row = cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass", (table,)).fetchone()
        data = np.array(citus.execute(f"SELECT amount::float8, qty::float8 FROM {table}").fetchall(), dtype=float)
        g1, g2 = np.asarray(row["grid1"]), np.asarray(row["grid2"])
        counts = np.diff(np.diff(np.asarray(row["sat_count"]).reshape(len(g1), len(g2)), axis=0), axis=1)
        np.testing.assert_array_equal(counts, np.histogram2d(data[:, 0], data[:, 1], bins=[g1, g2])[0])
        total = citus.execute(f"SELECT approx_count('{table}', 'amount', NULL::float8, NULL::float8, 'qty', "
                              "NULL::float8, NULL::float8)").fetchone()[0]
        assert total == 100000
        citus.execute(f"SELECT kde_refresh('{table}', ARRAY['amount', 'qty'])")
        assert citus.execute(md5).fetchone()[0] == first
    finally:
        citus.execute(f"DROP TABLE IF EXISTS {table}")


def test_a_distributed_pair_that_fits_is_its_exact_frequency_table(citus):
    """A pair of few values on a distributed table (0.10.0): its pairs are read with one GROUP BY, which Citus
    runs on the shards, and the synopsis is their exact frequency table: every box and sum is the table's."""
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    citus.execute(f"CREATE TABLE {table} (id bigint, hour integer, price numeric(6,1))")
    try:
        citus.execute(f"SELECT create_distributed_table('{table}', 'id')")
        citus.execute(f"INSERT INTO {table} SELECT g, g % 24, round(((g * 7919) % 300) / 10.0 + g % 24, 1) "
                      f"FROM generate_series(1, 60000) g")
        summary = citus.execute(f"SELECT kde_refresh('{table}', ARRAY['hour', 'price'])").fetchone()[0]
        assert summary["method"] == "table" and summary["rows"] == 60000
        for lo1, hi1, lo2, hi2 in ((3, 9, 5.5, 20.0), (None, 12, 10.0, None), (7, 7, None, None), (0, 23, 3.3, 3.3)):
            got = citus.execute(f"SELECT approx_count('{table}', 'hour', %s::float8, %s::float8, 'price', %s::float8, "
                                "%s::float8)", (lo1, hi1, lo2, hi2)).fetchone()[0]
            exact = citus.execute(
                f"SELECT count(*) FROM {table} WHERE hour BETWEEN coalesce(%s, -1e9) AND coalesce(%s, 1e9) "
                "AND price BETWEEN coalesce(%s, -1e9) AND coalesce(%s, 1e9)", (lo1, hi1, lo2, hi2)).fetchone()[0]
            assert got == exact, (lo1, hi1, lo2, hi2)
        got = citus.execute(f"SELECT approx_sum('{table}', 'price', 'hour', 3, 9)").fetchone()[0]
        exact = citus.execute(f"SELECT sum(price)::float8 FROM {table} WHERE hour BETWEEN 3 AND 9").fetchone()[0]
        assert got == pytest.approx(exact, rel=1e-12)
    finally:
        citus.execute(f"DROP TABLE IF EXISTS {table}")


def test_a_distributed_table_of_many_columns_answers_boxes_and_groups(citus):
    """A synopsis of 4 columns (numeric, integer, timestamptz, text) of a distributed table: its refresh
    samples the shards, repeats bit for bit, and its boxes and groups are near the exact answers."""
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    citus.execute(f"CREATE TABLE {table} (id bigint, amount numeric(12,2), qty integer, created_at timestamptz, "
                  "region text)")
    try:
        citus.execute(f"SELECT create_distributed_table('{table}', 'id')")
        citus.execute("SELECT setseed(0.3)")
        citus.execute(
            f"INSERT INTO {table} SELECT g, round((20 + 10 * r1 + 5 * random())::numeric, 2), (r1 * 4)::int + "
            f"(random() * 3)::int, timestamptz '2024-01-01' + (r1 * 300 + random() * 60) * interval '1 day', "
            f"(ARRAY['north', 'south', 'east', 'west'])[1 + (g % 4)] "
            f"FROM (SELECT g, random() AS r1 FROM generate_series(1, 120000) g) s")
        cols = ["amount", "qty", "created_at", "region"]
        summary = citus.execute(f"SELECT kde_refresh('{table}', %s::text[])", (cols,)).fetchone()[0]
        assert summary["rows"] == 120000
        first = citus.execute("SELECT md5(p::text) FROM kde_synopsis_nd p WHERE relid = %s::regclass",
                              (table,)).fetchone()[0]
        citus.execute(f"SELECT kde_refresh('{table}', %s::text[])", (cols,))
        assert citus.execute("SELECT md5(p::text) FROM kde_synopsis_nd p WHERE relid = %s::regclass",
                             (table,)).fetchone()[0] == first
        box = ("ARRAY['amount', 'created_at']", "ARRAY['25', '2024-03-01']", "ARRAY['30', '2024-08-01']")
        est = citus.execute(f"SELECT approx_count('{table}', {box[0]}, {box[1]}::text[], {box[2]}::text[])").fetchone()[0]
        truth = citus.execute(f"SELECT count(*) FROM {table} WHERE amount BETWEEN 25 AND 30 "
                              "AND created_at BETWEEN '2024-03-01' AND '2024-08-01'").fetchone()[0]
        assert truth > 5000 and max(est / truth, truth / est) < 1.1
        groups = dict(citus.execute(f"SELECT grp, estimate FROM approx_count_by('{table}', 'region', {box[0]}, "
                                    f"{box[1]}::text[], {box[2]}::text[])").fetchall())
        exact = dict(citus.execute(f"SELECT region, count(*) FROM {table} WHERE amount BETWEEN 25 AND 30 "
                                   "AND created_at BETWEEN '2024-03-01' AND '2024-08-01' GROUP BY region").fetchall())
        assert set(exact) <= set(groups)
        for region, count in exact.items():
            assert abs(groups[region] - count) / count < 0.15
    finally:
        citus.execute(f"DROP TABLE IF EXISTS {table}")


def _stale(citus, table, want: bool, seconds: float = 30.0, modified: int = 0):
    """kde_synopses' (stale, rows_modified) of the table's first synopsis once stale is ``want`` and at least
    ``modified`` rows are counted (workers report their counters within about 10 s), or the last seen after
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        row = citus.execute("SELECT stale, rows_modified FROM kde_synopses WHERE relid = %s::regclass "
                            "ORDER BY cardinality(cols) LIMIT 1", (table,)).fetchone()
        if (row[0] is want and row[1] >= modified) or time.monotonic() > deadline:
            return row
        time.sleep(0.5)


def test_a_distributed_table_goes_stale_as_its_shards_change(citus):
    """The coordinator's relation is an empty shell: staleness reads the shards. +20% rows, deletes and a
    TRUNCATE make the synopsis stale, kde_refresh_stale rebuilds it, and the total is then exact."""
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    citus.execute(f"CREATE TABLE {table} (id bigint, amount numeric(12,2), qty integer, score float8)")
    try:
        citus.execute(f"SELECT create_distributed_table('{table}', 'id')")
        citus.execute(f"INSERT INTO {table} SELECT g, (g % 5000) / 100.0, g % 37, sqrt(g) "
                      "FROM generate_series(1, 50000) g")
        citus.execute(f"SELECT kde_refresh('{table}', 'amount')")
        citus.execute(f"SELECT kde_refresh('{table}', ARRAY['amount', 'qty', 'score'])")
        time.sleep(11)  # the load's counters reach the workers' statistics; then a refresh counts them all
        citus.execute(f"SELECT kde_refresh('{table}', 'amount')")
        citus.execute(f"SELECT kde_refresh('{table}', ARRAY['amount', 'qty', 'score'])")
        assert _stale(citus, table, False, 0) == (False, 0)
        citus.execute(f"INSERT INTO {table} SELECT g, (g % 5000) / 100.0, g % 37, sqrt(g) "
                      "FROM generate_series(50001, 60000) g")
        stale, modified = _stale(citus, table, True, modified=10000)
        assert stale is True and modified >= 10000
        refreshed = citus.execute("SELECT kde_refresh_stale()").fetchone()[0]
        assert refreshed == 2
        assert citus.execute(f"SELECT approx_count('{table}', 'amount', NULL, NULL)").fetchone()[0] == 60000
        est = citus.execute(f"SELECT approx_count('{table}', ARRAY['qty', 'score'], ARRAY[NULL, NULL]::float8[], "
                            "ARRAY[NULL, NULL]::float8[])").fetchone()[0]
        assert est == pytest.approx(60000)
        time.sleep(11)  # nothing left to report: the refreshed synopses stay fresh
        assert _stale(citus, table, False, 0) == (False, 0)
        citus.execute(f"DELETE FROM {table} WHERE id <= 10000")  # 1/6 of the rows: past the 10% that is stale
        assert _stale(citus, table, True, modified=10000)[0] is True
        citus.execute(f"SELECT kde_refresh('{table}', 'amount')")
        citus.execute(f"TRUNCATE {table}")  # new storage files on every shard, the counters unchanged
        assert citus.execute("SELECT stale FROM kde_synopses WHERE relid = %s::regclass AND cols = '{amount}'",
                             (table,)).fetchone()[0] is True
    finally:
        citus.execute(f"DROP TABLE IF EXISTS {table}")


def test_a_distributed_table_s_privileges_and_policies_hold_on_the_coordinator(citus):
    """As a role that is not the owner: a column it may not read is refused, alone or in a multi-column
    synopsis, one it may read is answered (and its staleness read on the shards), and row-level security on
    the distributed table refuses every synopsis of it, as on a local table."""
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    role = f"kde_reader_{uuid.uuid4().hex[:8]}"
    citus.execute(f"CREATE TABLE {table} (id bigint, amount numeric(12,2), secret numeric(12,2), qty integer)")
    try:
        citus.execute(f"SELECT create_distributed_table('{table}', 'id')")
        citus.execute(f"INSERT INTO {table} SELECT g, (g % 3000) / 100.0, (g % 77) / 10.0, g % 13 "
                      "FROM generate_series(1, 20000) g")
        citus.execute(f"SELECT kde_refresh('{table}', 'amount')")
        citus.execute(f"SELECT kde_refresh('{table}', 'secret')")
        citus.execute(f"SELECT kde_refresh('{table}', ARRAY['amount', 'secret', 'qty'])")
        citus.execute(f"CREATE ROLE {role} LOGIN")
        dsn = psycopg.conninfo.make_conninfo(citus.info.dsn, user=role)
        with psycopg.connect(dsn, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT approx_count('{table}', 'amount', 5, 10)")
        # Citus 13 refuses a column list in a distributed GRANT; on the coordinator, where pg_kde reads the
        # synopses, it holds as given (the workers' shards are not read by approx_*)
        citus.execute("SET citus.enable_ddl_propagation TO off")
        citus.execute(f"GRANT SELECT (id, amount, qty) ON {table} TO {role}")
        citus.execute("RESET citus.enable_ddl_propagation")
        with psycopg.connect(dsn, autocommit=True) as conn:
            est = conn.execute(f"SELECT approx_count('{table}', 'amount', 5, 10)").fetchone()[0]
            assert est == pytest.approx(citus.execute(f"SELECT count(*) FROM {table} WHERE amount BETWEEN 5 AND 10")
                                        .fetchone()[0], rel=0.01)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT approx_count('{table}', 'secret', 1, 2)")
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match='column "?secret"?'):
                conn.execute(f"SELECT approx_count('{table}', ARRAY['amount', 'secret'], ARRAY[5, 1]::float8[], "
                             "ARRAY[10, 5]::float8[])")
            # the one synopsis of amount and qty holds secret too: the role may not read it
            with pytest.raises(psycopg.errors.UndefinedObject, match="covers columns amount, qty"):
                conn.execute(f"SELECT approx_count('{table}', ARRAY['amount', 'qty'], ARRAY[5, 1]::float8[], "
                             "ARRAY[10, 5]::float8[])")
        citus.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        citus.execute(f"CREATE POLICY few ON {table} TO {role} USING (qty < 5)")
        with psycopg.connect(dsn, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
                conn.execute(f"SELECT approx_count('{table}', 'amount', 5, 10)")
    finally:
        citus.execute(f"DROP TABLE IF EXISTS {table}")
        citus.execute(f"DROP ROLE IF EXISTS {role}")


def test_a_large_distributed_table_is_read_once(citus):
    """The coordinator's relation is an empty shell: the size that decides a block sample is the shards'. With
    pg_kde.sample_blocks well below it, a block sample places the grid and the refresh scans each shard once;
    with 0 it scans each at least twice. The cells are exact either way."""
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    citus.execute(f"CREATE TABLE {table} (id bigint, amount numeric(12,2))")
    try:
        citus.execute(f"SELECT create_distributed_table('{table}', 'id', shard_count => 8)")
        citus.execute("SELECT setseed(0.2)")
        citus.execute(f"INSERT INTO {table} SELECT g, round(exp(3 + sqrt(-2 * ln(1 - random())) "
                      f"* cos(2 * pi() * random()))::numeric, 2) FROM generate_series(1, 150000) g")
        x = np.array([r[0] for r in citus.execute(f"SELECT amount::float8 FROM {table}")], dtype=float)

        def scans():
            time.sleep(11)  # the workers report their counters
            return citus.execute(f"SELECT sum(result::bigint) FROM run_command_on_shards('{table}', "
                                 "$$SELECT pg_stat_get_numscans(%1$L::regclass)$$)").fetchone()[0]

        # (each shard draws the same block numbers of a repeatable SYSTEM sample: 64 of the ~800 blocks, about 8
        # of each shard's ~100; a sample that finds no row is followed by a row sample, a second read)
        for blocks, fewest, most in (("64", 8, 8), ("0", 16, None)):
            # a first build each time: a refresh with a kept plan reads only the shards that changed
            citus.execute(f"DELETE FROM kde_catalog WHERE relid = '{table}'::regclass")
            before = scans()
            citus.execute(f"SET pg_kde.sample_blocks = {blocks}")
            try:
                citus.execute(f"SELECT kde_refresh('{table}', 'amount')")
            finally:
                citus.execute("RESET pg_kde.sample_blocks")
            made = scans() - before
            assert made >= fewest and (most is None or made <= most), (blocks, made)
            with citus.cursor(row_factory=dict_row) as cur:
                row = cur.execute("SELECT * FROM kde_synopsis WHERE relid = %s::regclass", (table,)).fetchone()
            assert_exact_cells(row, x)
    finally:
        citus.execute(f"DROP TABLE IF EXISTS {table}")


def test_a_distributed_table_partitioned_by_time_rebuilds_the_partitions_that_changed(citus):
    """A distributed table partitioned by month: kde_refresh builds each partition's synopsis where its shards
    live and merges them; rows appended to the last month make the parent stale, and the next refresh rebuilds
    that partition only (its shards' counters moved, the others' did not); the merged total is exact."""
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    citus.execute(f"CREATE TABLE {table} (id bigint, at timestamptz, amount numeric(12,2)) PARTITION BY RANGE (at)")
    try:
        for month in range(1, 4):
            citus.execute(f"CREATE TABLE {table}_m{month} PARTITION OF {table} FOR VALUES FROM "
                          f"('2024-{month:02d}-01') TO ('2024-{month + 1:02d}-01')")
        citus.execute(f"SELECT create_distributed_table('{table}', 'id')")
        citus.execute(f"INSERT INTO {table} SELECT g, timestamptz '2024-01-01' + (g % 90) * interval '1 day', "
                      "(g % 4000) / 100.0 FROM generate_series(1, 90000) g")
        time.sleep(11)  # the workers report the load's counters: the refresh starts fresh
        first = citus.execute(f"SELECT kde_refresh('{table}', 'amount')").fetchone()[0]
        assert (first["partitions"], first["rebuilt"], first["reused"]) == (3, 3, 0)
        citus.execute(f"INSERT INTO {table} SELECT g, timestamptz '2024-03-15', 1.5 FROM generate_series(90001, 120000) g")
        assert _stale(citus, table, True, modified=30000)[0] is True
        again = citus.execute(f"SELECT kde_refresh('{table}', 'amount')").fetchone()[0]
        assert (again["rebuilt"], again["reused"], again["rows"]) == (1, 2, 120000)
        # the appended value is a heavy value of its partition, kept exactly (the parent's cells give it no cell
        # of its own): the point query is right to a few rows, those the other months hold in their cells
        assert citus.execute(f"SELECT approx_count('{table}', 'amount', 1.5, 1.5)").fetchone()[0] == pytest.approx(
            citus.execute(f"SELECT count(*) FROM {table} WHERE amount = 1.5").fetchone()[0], abs=20)
    finally:
        citus.execute(f"DROP TABLE IF EXISTS {table}")


def test_staleness_on_the_workers_ignores_their_search_path(citus):
    """The command that reads the shards runs on the workers under their search_path: an operator a role put
    in public there (|| on bigint and text, an exact match where pg_catalog's is polymorphic) must not be the
    one it calls. Here the planted operator fails: used, every shard would read as unanswered (stale)."""
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    plant = ("SET citus.enable_ddl_propagation TO off; "
             "CREATE FUNCTION public.kde_planted(bigint, text) RETURNS text LANGUAGE sql AS $$SELECT (1 / 0)::text$$; "
             "CREATE OPERATOR public.|| (LEFTARG = bigint, RIGHTARG = text, FUNCTION = public.kde_planted)")
    citus.execute(f"CREATE TABLE {table} (id bigint, amount numeric(12,2))")
    try:
        citus.execute(f"SELECT create_distributed_table('{table}', 'id', shard_count => 4)")
        citus.execute(f"INSERT INTO {table} SELECT g, g % 1000 / 10.0 FROM generate_series(1, 4000) g")
        time.sleep(11)  # the load's counters reach the workers' statistics: the refresh counts them all
        citus.execute(f"SELECT kde_refresh('{table}', 'amount')")
        assert all(r[0] for r in citus.execute("SELECT success FROM run_command_on_workers(%s)", (plant,)))
        assert citus.execute(f"SELECT stale_reason FROM kde_synopses WHERE relid = '{table}'::regclass").fetchone() \
            == (None,)
        state = citus.execute(f"SELECT storage_id FROM _kde_table_state('{table}')").fetchone()[0]
        assert "?" not in state and state.count("@") == 4
    finally:
        citus.execute("SELECT run_command_on_workers('SET citus.enable_ddl_propagation TO off; "
                      "DROP OPERATOR IF EXISTS public.|| (bigint, text); DROP FUNCTION IF EXISTS public.kde_planted(bigint, text)')")
        citus.execute(f"DROP TABLE IF EXISTS {table}")


def test_where_the_design_is_exact_a_distributed_synopsis_equals_the_local_copy_s(citus):
    """The same rows in a distributed table and in a local table on the coordinator: exact frequency tables (a
    1-D column of few values, and a pair) are the same payload bit for bit, and a column of many values, whose
    grid comes from a sample of each table's own blocks, has cells whose counts and sums are exact on either
    grid, and the same total."""
    dist, local = (f"kde_citus_{uuid.uuid4().hex[:8]}" for _ in range(2))
    citus.execute(f"CREATE TABLE {local} (id bigint, hour integer, price numeric(6,1), amount numeric(12,2), "
                  "at timestamptz)")
    try:
        citus.execute("SELECT setseed(0.4)")
        citus.execute(f"INSERT INTO {local} SELECT g, g % 24, round(((g * 7919) % 300) / 10.0 + g % 24, 1), "
                      "round(exp(3 + sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))::numeric, 2), "
                      "timestamptz '2024-01-01 00:00+00' + floor(random() * 366) * interval '1 day' + "
                      "mod(floor(46800 + 12600 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))::int + "
                      "86400, 86400) * interval '1 second' FROM generate_series(1, 80000) g")
        citus.execute(f"CREATE TABLE {dist} (LIKE {local})")
        citus.execute(f"SELECT create_distributed_table('{dist}', 'id', shard_count => 8)")
        citus.execute(f"INSERT INTO {dist} SELECT * FROM {local}")
        payload = ("SELECT to_jsonb(p) - 'relid' - 'cols' FROM {table} p "
                   "WHERE relid = %s::regclass AND cols = %s::text[]")
        for cols, table in ((["hour"], "kde_synopsis"), (["price"], "kde_synopsis"),
                            (["hour", "price"], "kde_synopsis_2d")):
            target = "%s::text[]" if len(cols) > 1 else "%s::text"
            built = {t: citus.execute(f"SELECT kde_refresh('{t}', {target})", (cols if len(cols) > 1 else cols[0],))
                     .fetchone()[0] for t in (dist, local)}
            assert built[dist]["method"] == built[local]["method"] and built[dist]["rows"] == 80000
            same = [citus.execute(payload.format(table=table), (t, cols)).fetchone()[0] for t in (dist, local)]
            assert same[0] == same[1], cols  # bit for bit: the same exact table
        for t in (dist, local):
            citus.execute(f"SELECT kde_refresh('{t}', 'amount')")
        x = np.array([r[0] for r in citus.execute(f"SELECT amount::float8 FROM {local}")], dtype=float)
        for t in (dist, local):
            with citus.cursor(row_factory=dict_row) as cur:
                row = cur.execute("SELECT * FROM kde_synopsis WHERE relid = %s::regclass AND cols = '{amount}'",
                                  (t,)).fetchone()
            assert_exact_cells(row, x)
            assert citus.execute(f"SELECT approx_count('{t}', 'amount', NULL::float8, NULL::float8)").fetchone()[0] == 80000
        # A time column's daily profile is counted on every shard in the same scan (0.16.0) and combined: the
        # profile of every row off the heavy values, as the local table's.
        at = np.array([r[0] for r in citus.execute(f"SELECT extract(epoch FROM at)::float8 FROM {local}")], dtype=float)
        for t in (dist, local):
            assert citus.execute(f"SELECT kde_refresh('{t}', 'at', budget => 2048)").fetchone()[0]["period"] == 86400.0
            with citus.cursor(row_factory=dict_row) as cur:
                row = cur.execute("SELECT * FROM kde_synopsis WHERE relid = %s::regclass AND cols = '{at}'",
                                  (t,)).fetchone()
            assert row["kde_rows"] == row["profile"][-1] == 80000 and not row["atom_values"]
            want = make_profile(period_counts(at, 86400.0, len(row["profile"]) - 2, row["step"]))
            np.testing.assert_array_equal(np.asarray(row["profile"], dtype=np.float32), want.astype(np.float32))
    finally:
        citus.execute(f"DROP TABLE IF EXISTS {dist}")
        citus.execute(f"DROP TABLE IF EXISTS {local}")


def _as_role(citus, role: str, query: str):
    """The first value of ``query`` run as ``role`` (SET ROLE, reset after)."""
    citus.execute(f"SET ROLE {role}")
    try:
        return citus.execute(query).fetchone()[0]
    finally:
        citus.execute("RESET ROLE")


def test_a_refresh_reads_again_only_the_shards_that_changed(citus):
    """A table distributed by hash keeps each shard's answer to the refresh's scan (kde_parts): a refresh after
    rows of one shard changed reads that shard only (the others' scan counters stay still), reuses the others'
    answers, and gives the synopsis a scan of every shard gives with the same plan, bit for bit; its cells are
    exact and its total is the table's. The same for a pair, and for a pair with a discretised axis. A role
    that may not write kde_parts refreshes too, and keeps nothing there."""
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    citus.execute(f"CREATE TABLE {table} (id bigint, amount numeric(12,2), score float8, qty integer)")
    role = f"kde_citus_role_{uuid.uuid4().hex[:8]}"
    try:
        citus.execute(f"SELECT create_distributed_table('{table}', 'id', shard_count => 8)")
        citus.execute("SELECT setseed(0.6)")
        citus.execute(f"INSERT INTO {table} SELECT g, round(exp(3 + sqrt(-2 * ln(1 - random())) "
                      f"* cos(2 * pi() * random()))::numeric, 2), sqrt(g), (g * 7919) % 37 "
                      "FROM generate_series(1, 150000) g")
        citus.execute("SET pg_kde.sample_blocks = 64")  # a sample of blocks places the grid: the scan takes the rows
        targets = (("'amount'", "kde_synopsis", "'{amount}'"), ("ARRAY['amount', 'score']", "kde_synopsis_2d",
                                                                "'{amount,score}'"),
                   ("ARRAY['score', 'qty']", "kde_synopsis_2d", "'{score,qty}'"))
        for target, _, _ in targets:
            first = citus.execute(f"SELECT kde_refresh('{table}', {target})").fetchone()[0]
            # (8 a scan: a pair's second scan may be planned from its first one's row sample, which shows that
            # the blocks, drawn at the same places in every shard, missed most of score's range)
            assert (first["shards"], first["shards_kept"]) == (8, True) and first["shards_read"] in (8, 16, 24), first
        time.sleep(11)  # the load's counters reach the workers' statistics
        for target, _, _ in targets:  # the kept plan's scan, once on every shard
            citus.execute(f"SELECT kde_refresh('{table}', {target})")
        for target, _, _ in targets:
            again = citus.execute(f"SELECT kde_refresh('{table}', {target})").fetchone()[0]
            assert (again["shards_read"], again["shards_reused"]) == (0, 8), again
        shard = citus.execute(f"SELECT get_shard_id_for_distribution_column('{table}', 7)").fetchone()[0]

        def scans():
            time.sleep(11)  # the workers report their counters
            return {int(r[0]): int(r[1]) for r in citus.execute(
                f"SELECT shardid, result FROM run_command_on_shards('{table}', "
                "$$SELECT pg_stat_get_numscans(%1$L::regclass)$$)")}

        citus.execute(f"UPDATE {table} SET amount = amount + 1 WHERE id = 7")
        citus.execute(f"INSERT INTO {table} SELECT 7, 12.34, s, 5 FROM generate_series(1, 50) s")
        before = scans()
        payloads = {}
        for target, payload, cols in targets:
            after = citus.execute(f"SELECT kde_refresh('{table}', {target})").fetchone()[0]
            assert (after["rows"], after["shards_read"], after["shards_reused"]) == (150050, 1, 7), after
            payloads[cols] = citus.execute(f"SELECT md5((to_jsonb(p) - 'relid')::text) FROM {payload} p "
                                              f"WHERE relid = '{table}'::regclass AND cols = {cols}").fetchone()[0]
        made = {s: n - before[s] for s, n in scans().items()}
        assert made[shard] >= 2 and all(n == 0 for s, n in made.items() if s != shard), made
        x = np.array([r[0] for r in citus.execute(f"SELECT amount::float8 FROM {table}")], dtype=float)
        with citus.cursor(row_factory=dict_row) as cur:
            row = cur.execute("SELECT * FROM kde_synopsis WHERE relid = %s::regclass", (table,)).fetchone()
        assert_exact_cells(row, x)
        assert citus.execute(f"SELECT approx_count('{table}', 'amount', NULL::float8, NULL::float8)").fetchone()[0] == 150050
        box = (f"SELECT approx_count('{table}', 'amount', 10, 20, 'score', 100, 300), "
               f"(SELECT count(*) FROM {table} WHERE amount BETWEEN 10 AND 20 AND score BETWEEN 100 AND 300)")
        est, truth = citus.execute(box).fetchone()
        assert abs(est - truth) / truth < 0.02
        # The same plan's scan of every shard (the kept identities forgotten) gives the same synopsis
        citus.execute(f"UPDATE kde_parts SET identities = array_fill('moved'::text, ARRAY[cardinality(shards)]) "
                      f"WHERE relid = '{table}'::regclass")
        for target, payload, cols in targets:
            full = citus.execute(f"SELECT kde_refresh('{table}', {target})").fetchone()[0]
            assert (full["shards_read"], full["shards_reused"]) == (8, 0)
            assert citus.execute(f"SELECT md5((to_jsonb(p) - 'relid')::text) FROM {payload} p "
                                 f"WHERE relid = '{table}'::regclass AND cols = {cols}").fetchone()[0] == payloads[cols], cols
        # A role that is not a superuser and may write the synopses but not kde_parts: it plans (Citus runs the
        # sample's aggregate as the caller), reads every shard (it reuses only answers it kept itself), and
        # keeps nothing
        citus.execute(f"CREATE ROLE {role} LOGIN")
        citus.execute(f"GRANT SELECT ON {table} TO {role}")
        citus.execute(f"GRANT INSERT, UPDATE, DELETE ON kde_catalog, kde_synopsis, kde_synopsis_2d TO {role}")
        mine = _as_role(citus, role, f"SELECT kde_refresh('{table}', 'amount', budget => 4096)")
        assert (mine["shards_reused"], mine["shards_kept"], mine["rows"]) == (0, False, 150050), mine
        assert mine["shards_read"] >= 8
        # Granted kde_parts too, it keeps its own answers; the owner's next refresh does not reuse them (a
        # writer could have put anything there) and keeps its own again
        citus.execute(f"GRANT INSERT, UPDATE, DELETE ON kde_parts TO {role}")
        mine = _as_role(citus, role, f"SELECT kde_refresh('{table}', 'amount')")
        assert mine["shards_kept"] is True
        assert citus.execute(f"SELECT written_by::text FROM kde_parts WHERE relid = '{table}'::regclass "
                             "AND cols = '{amount}'").fetchone()[0] == role
        again = citus.execute(f"SELECT kde_refresh('{table}', 'amount')").fetchone()[0]
        assert (again["shards_reused"], again["shards_kept"]) == (0, True) and again["shards_read"] >= 8
        assert citus.execute(f"SELECT written_by::text FROM kde_parts WHERE relid = '{table}'::regclass "
                             "AND cols = '{amount}'").fetchone()[0] == citus.execute("SELECT current_user").fetchone()[0]
    finally:
        citus.execute("RESET pg_kde.sample_blocks")
        citus.execute(f"DROP TABLE IF EXISTS {table}")
        citus.execute(f"DROP OWNED BY {role}") if citus.execute(
            "SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() else None
        citus.execute(f"DROP ROLE IF EXISTS {role}")


def test_in_the_transaction_that_truncated_a_distributed_table_its_shards_are_not_waited_for(citus):
    """A transaction that truncated a distributed table holds its ACCESS EXCLUSIVE lock, which the workers'
    connections that read the shards would wait for until the transaction ends: kde_refresh says so at once,
    and kde_synopses reads the synopsis as stale (the shards did not answer) instead of waiting."""
    table = f"kde_citus_{uuid.uuid4().hex[:8]}"
    citus.execute(f"CREATE TABLE {table} (id bigint, amount numeric(12,2))")
    try:
        citus.execute(f"SELECT create_distributed_table('{table}', 'id', shard_count => 4)")
        citus.execute(f"INSERT INTO {table} SELECT g, g % 1000 / 10.0 FROM generate_series(1, 4000) g")
        citus.execute(f"SELECT kde_refresh('{table}', 'amount')")
        citus.execute("BEGIN")
        try:
            citus.execute("SET LOCAL statement_timeout = '20s'")  # (a wait fails the test instead of hanging it)
            citus.execute(f"TRUNCATE {table}")
            assert citus.execute("SELECT stale, stale_reason FROM kde_synopses WHERE relid = %s::regclass",
                                 (table,)).fetchone() == (True, "could not read 4 shard(s) of the Citus table on the workers")
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="earlier in this transaction"):
                citus.execute(f"SELECT kde_refresh('{table}', 'amount')")
        finally:
            citus.execute("ROLLBACK")
        assert citus.execute(f"SELECT approx_count('{table}', 'amount', NULL::float8, NULL::float8)").fetchone()[0] == 4000
    finally:
        citus.execute(f"DROP TABLE IF EXISTS {table}")
