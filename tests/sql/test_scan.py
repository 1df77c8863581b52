"""The refresh's scan on the real server: the C aggregate _kde_cells (extension/cells.c) against its float64
reference (ArrayTableReader.scan_1d) on the same rows; the same state in parallel and serial plans; numeric
and time values read exactly as their casts read them; bad arguments refused."""

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")
from psycopg import sql  # noqa: E402

from pg_kde.synopsis.cells import period_counts  # noqa: E402
from pg_kde.synopsis.reader import TAIL_MOST, TAIL_VALUES, ArrayTableReader, fine_quantum  # noqa: E402
from pg_kde.synopsis.sql_reader import decode_cells, decode_phases, decode_sample, float8_array  # noqa: E402
from sqlhelpers import load  # noqa: E402

PARALLEL = ("SET parallel_setup_cost = 0", "SET parallel_tuple_cost = 0", "SET min_parallel_table_scan_size = 0",
            "SET max_parallel_workers_per_gather = 2")
SERIAL = ("SET max_parallel_workers_per_gather = 0",)


def scan(db, table, expr, points, candidates, quantum, settings=(), tail=TAIL_VALUES):
    for s in settings:
        db.execute(s)
    try:
        query = (f"SELECT count(*) AS n, _kde_cells({expr}, {float8_array(points)}, {float8_array(candidates)}, "
                 f"{float(quantum)!r}::float8, {tail}) AS s FROM {sql.Identifier(table).as_string(db)}")
        n, state = db.execute(query).fetchone()
        plan = "\n".join(r[0] for r in db.execute("EXPLAIN " + query).fetchall())
    finally:
        db.execute("RESET ALL")
    return n, state, plan


def same_scan(a, b):
    for field in ("rows", "non_null", "non_finite", "non_integral", "off_lattice", "overflow", "lo", "hi", "all_lo",
                  "all_hi", "cell_quanta", "quantum"):
        assert getattr(a, field) == getattr(b, field), field
    np.testing.assert_array_equal(a.cell_rows, b.cell_rows)
    np.testing.assert_array_equal(a.candidate_rows, b.candidate_rows)
    np.testing.assert_array_equal(a.low, b.low)  # the extreme cell values, repeats included
    np.testing.assert_array_equal(a.high, b.high)


@pytest.mark.parametrize("kind, tail", [("cents", TAIL_VALUES), ("continuous", TAIL_VALUES), ("cents", 5000),
                                        ("continuous", TAIL_MOST)])
def test_the_aggregate_equals_its_reference_in_parallel_and_serial_plans(db, table, kind, tail):
    # (a tail of 5,000 or 16,384 cell values at each end: the heaps hold 10,000 or 32,768 of the cells' ~58,000
    # rows)
    rng = np.random.default_rng(5)
    n = 60000
    x = np.round(rng.lognormal(3.0, 1.2, n), 2) if kind == "cents" else rng.standard_t(3, n) * 1e3
    x[rng.random(n) < 0.03] = np.nan  # NULLs
    x[:50] = 7.25  # a heavy value
    x[50:53] = 1e6  # beyond the grid: the last cell
    load(db, table, {"x": x}, {"x": "numeric(14,2)" if kind == "cents" else "float8"})
    values = x[~np.isnan(x)]
    points = np.quantile(values, np.linspace(0.05, 0.95, 40))
    candidates = np.array([7.25, 12.5, 3.0e7])
    quantum = 0.01 if kind == "cents" else fine_quantum(values.min(), values.max())
    rows, state, plan = scan(db, table, "x", points, candidates, quantum, PARALLEL, tail)
    assert "Partial Aggregate" in plan and "Gather" in plan  # PostgreSQL's parallel query runs it
    parallel = decode_cells(rows, state, len(points), len(candidates), quantum, tail)
    rows, serial_state, plan = scan(db, table, "x", points, candidates, quantum, SERIAL, tail)
    assert "Partial Aggregate" not in plan
    # Integer counts and sums: the same in any order. The extreme values' heaps (the state's last bytes) hold
    # the same values, in an order that depends on the scan's.
    # (the heaps' room, doubled from 256 as they fill, is the same: it follows the values they hold)
    cap = int.from_bytes(bytes(state)[4 + 108:4 + 112], "little")
    held = min(tail, int(parallel.cell_rows.sum()))
    assert cap == min(tail, 256 * 2 ** max(0, int(np.ceil(np.log2(held / 256)))))
    heaps = 2 * 8 * cap
    assert len(bytes(state)) == len(bytes(serial_state)) and bytes(serial_state)[:-heaps] == bytes(state)[:-heaps]
    serial = decode_cells(rows, serial_state, len(points), len(candidates), quantum, tail)
    np.testing.assert_array_equal(serial.low, parallel.low)
    np.testing.assert_array_equal(serial.high, parallel.high)
    # the column as the server's float8 cast reads it, through the reference
    column = np.array([r[0] for r in db.execute(
        sql.SQL("SELECT x::float8 FROM {}").format(sql.Identifier(table))).fetchall()], dtype=float)
    reference = ArrayTableReader((column,)).scan_1d(points, candidates, quantum, tail=tail)
    same_scan(parallel, reference)
    assert len(parallel.high) == min(tail, parallel.cell_rows.sum()) and parallel.tail == tail
    assert parallel.candidate_rows[0] == (values == 7.25).sum() >= 50 and parallel.non_null == len(values)
    assert parallel.rows == n
    if kind == "cents":
        assert parallel.off_lattice == 0 and parallel.non_integral > 0
        heavy = sum(int(k) * int(round(v * 100)) for k, v in zip(parallel.candidate_rows, candidates))
        assert sum(parallel.cell_quanta) + heavy == int(np.round(values * 100).astype(np.int64).sum())  # exact cents


def test_numeric_values_are_read_as_the_cast_reads_them(db):
    # Every value must equal its ::float8 exactly: with the values themselves as candidates, every row is a
    # candidate's and none reaches the cells.
    db.execute("""CREATE TEMP TABLE nums AS
        SELECT round((sign * (random() * 10 ^ p))::numeric(60, 20), s) AS v
        FROM generate_series(-25, 25) p, generate_series(0, 20) s, (VALUES (1), (-1)) g(sign),
             generate_series(1, 20) r
        UNION ALL SELECT v::numeric FROM (VALUES ('0'), ('1e300'), ('-1e-300'), ('123456789012345678901234567890.123'),
             ('9007199254740993'), ('0.1'), ('1e-22'), ('1e23'), ('4.35'), ('0.0000000000000000000001')) t(v)""")
    n_bad = db.execute("SELECT count(*) FROM nums WHERE _kde_float8(v) IS DISTINCT FROM v::float8").fetchone()[0]
    assert n_bad == 0
    special = db.execute("SELECT _kde_float8('NaN'), _kde_float8('Infinity'), _kde_float8('-Infinity'), "
                         "_kde_float8(NULL)").fetchone()
    assert np.isnan(special[0]) and special[1:] == (float("inf"), float("-inf"), None)
    values = np.unique([r[0] for r in db.execute("SELECT v::float8 FROM nums").fetchall()])
    state = db.execute(f"SELECT _kde_cells(v, '{{0,1}}'::float8[], {float8_array(values)}, 1, 256) FROM nums").fetchone()[0]
    total = db.execute("SELECT count(*) FROM nums").fetchone()[0]
    decoded = decode_cells(total, state, 2, len(values), 1.0)
    assert decoded.candidate_rows.sum() == total and decoded.cell_rows.sum() == 0


@pytest.mark.parametrize("type_", ["timestamptz", "timestamp", "date"])
def test_time_values_are_read_as_extract_epoch_reads_them(db, type_):
    # microseconds past 2^53 (beyond about 2255 and before 1685) go through the decimal text
    db.execute(f"""CREATE TEMP TABLE times AS
        SELECT ('1970-01-01'::timestamp + make_interval(secs => (random() - 0.5) * 3e11))::{type_} AS t
        FROM generate_series(1, 5000)
        UNION ALL SELECT t::{type_} FROM (VALUES ('2024-03-01 12:34:56.789012'), ('1969-12-31 23:59:59.999999'),
             ('2400-01-01 00:00:00.000001'), ('0044-03-15 12:00:00 BC'), ('1970-01-01')) v(t)""")
    db.execute("SET TimeZone = 'America/St_Johns'")  # a half-hour offset: timestamptz is absolute, the others wall-clock
    try:
        values = np.unique([r[0] for r in db.execute("SELECT extract(epoch FROM t)::float8 FROM times").fetchall()])
        state = db.execute(f"SELECT _kde_cells(t, '{{0,1}}'::float8[], {float8_array(values)}, 1, 256) FROM times").fetchone()[0]
    finally:
        db.execute("RESET TimeZone")
    decoded = decode_cells(5005, state, 2, len(values), 1.0)
    assert decoded.candidate_rows.sum() == 5005 and decoded.cell_rows.sum() == 0
    n_inf = db.execute(f"SELECT _kde_cells(t, '{{0,1}}'::float8[], '{{}}'::float8[], 1, 256) FROM (VALUES "
                       f"('infinity'::{type_}), ('-infinity'::{type_}), (NULL)) v(t)").fetchone()[0]
    inf = decode_cells(3, n_inf, 2, 0, 1.0)
    assert (inf.non_null, inf.non_finite) == (2, 2)


@pytest.mark.parametrize("grid, candidates, quantum, tail, message", [
    ("'{1}'", "'{}'", "1", "256", "the grid needs at least 2 values"),
    ("'{2,1}'", "'{}'", "1", "256", "the grid must be finite and ascending"),
    ("'{0,NaN}'", "'{}'", "1", "256", "the grid must be finite and ascending"),
    ("'{0,1}'", "'{2,2}'", "1", "256", "the candidates must be finite and ascending"),
    ("'{0,1}'", "'{}'", "0", "256", "the quantum must be positive and finite"),
    ("'{0,1}'", "NULL", "1", "256", "_kde_cells needs a grid, candidates, a quantum and a tail"),
    ("'{0,1}'", "'{}'", "1", "NULL", "_kde_cells needs a grid, candidates, a quantum and a tail"),
    ("'{0,1}'", "'{}'", "1", "0", r"the tail must be from 1 to 16384 cell values, not 0"),
    ("'{0,1}'", "'{}'", "1", "16385", r"the tail must be from 1 to 16384 cell values, not 16385"),
    ("'{{0,1},{2,3}}'", "'{}'", "1", "256", "the grid must be a one-dimensional array without NULLs"),
])
def test_bad_arguments_are_refused(db, grid, candidates, quantum, tail, message):
    with pytest.raises(psycopg.Error, match=f"pg_kde: {message}"):
        db.execute(f"SELECT _kde_cells(x, {grid}::float8[], {candidates}::float8[], {quantum}::float8, {tail}::int4) "
                   "FROM (VALUES (1.0::float8)) v(x)")


def test_a_state_takes_the_bytes_of_the_values_it_holds(db, table):
    # A tail of 16,384 values at each end over 300 cell rows: the heaps' room doubles from 256 as they fill, to
    # 512 (a state of 16,384 each would be 256 KB, a Citus shard's stored answer 350 KB); in a parallel plan
    # the workers' states grow as they fill and so does their combination: the same room as a serial scan's.
    def state_bytes(rows, tail=TAIL_MOST):
        state = db.execute(f"SELECT _kde_cells(x::float8, '{{0,1000}}', '{{}}', 1, {tail}) "
                           f"FROM generate_series(1, {rows}) x").fetchone()[0]
        scan = decode_cells(rows, state, 2, 0, 1.0, tail)
        assert scan.low.tolist() == list(range(1, min(rows, tail) + 1)) and scan.cell_rows.sum() == rows
        return len(bytes(state))
    header = 4 + 112 + 2 * 8 + 3 * 8  # (padding, header, grid, a cell's rows and quanta; no varlena header)
    assert state_bytes(300) == header + 2 * 8 * 512
    assert state_bytes(100) == header + 2 * 8 * 256
    assert state_bytes(5000, 3000) == header + 2 * 8 * 3000
    assert state_bytes(20000) == header + 2 * 8 * TAIL_MOST
    x = np.random.default_rng(3).permutation(3000).astype(float)
    load(db, table, {"x": x})
    got = {}
    for settings in (PARALLEL, SERIAL):
        rows, state, plan = scan(db, table, "x", np.array([-1.0, 4000.0]), np.array([]), 1.0, settings, TAIL_MOST)
        assert ("Partial Aggregate" in plan) == (settings is PARALLEL)
        assert len(bytes(state)) == header + 2 * 8 * 4096
        got[settings] = decode_cells(rows, state, 2, 0, 1.0, TAIL_MOST)
        assert got[settings].low.tolist() == got[settings].high.tolist() == list(range(3000))


def test_states_of_different_tails_do_not_combine(db):
    states = [db.execute(f"SELECT _kde_cells(x, '{{0,1}}', '{{}}', 1, {tail}) FROM (VALUES (0.5::float8)) v(x)").fetchone()[0]
              for tail in (256, 257)]
    with pytest.raises(psycopg.Error, match="states of different grids, candidates, quanta or tails do not combine"):
        db.execute("SELECT _kde_cells_union(s ORDER BY i) FROM (VALUES (%s::bytea, 1), (%s::bytea, 2)) v(s, i)",
                   states)
    same = db.execute("SELECT _kde_cells_union(s) FROM (VALUES (%s::bytea), (%s::bytea)) v(s)",
                      (states[1], states[1])).fetchone()[0]
    assert decode_cells(2, same, 2, 0, 1.0, 257).cell_rows.tolist() == [2.0]
    with pytest.raises(ValueError, match="another grid, tail or version"):
        decode_cells(1, states[1], 2, 0, 1.0, 256)


def test_the_support_functions_check_every_state_they_take(db, login_role):
    # Every role may call the transition and combine functions (0.14.0: Citus's pushed-down aggregates run
    # them as the caller; up to 0.13.0 only the aggregates could). A state a role crafts and hands to them,
    # as the initial value of an aggregate of its own or through the union aggregates, is checked before it is
    # read: a clean error, never a read or write outside it.
    role, dsn = login_role()
    real = db.execute("SELECT _kde_cells(x, '{0,1,2}', '{}', 1, 256) FROM (VALUES (0.5::float8)) v(x)").fetchone()[0]
    sample = db.execute("SELECT _kde_sample(x, '(0,1)'::tid, 1::oid, 1.0, 7) FROM (VALUES (0.5::float8)) v(x)").fetchone()[0]
    crafted = {"\\x00000000": "not a _kde_cells state", "\\x" + bytes(real)[:-1].hex(): "not a _kde_cells state",
               "\\x" + (bytes(real)[:8] + b"\xff" * 8 + bytes(real)[16:]).hex(): "not a _kde_cells state"}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for initcond, message in crafted.items():
            conn.execute("DROP AGGREGATE IF EXISTS pg_temp.evil(float8, float8[], float8[], float8, int4)")
            conn.execute("CREATE AGGREGATE pg_temp.evil(float8, float8[], float8[], float8, int4) (SFUNC = _kde_cells_step, "
                         f"STYPE = bytea, INITCOND = '{initcond}')")
            with pytest.raises(psycopg.Error, match=message):
                conn.execute("SELECT pg_temp.evil(x, '{0,1,2}', '{}', 1, 256) FROM (VALUES (0.5::float8)) v(x)")
        for union, state, message in (("_kde_cells_union", bytes(real)[:-3], "not a _kde_cells state"),
                                      ("_kde_sample_union", bytes(sample)[:4] + b"\xff" * 4 + bytes(sample)[8:],
                                       "not a _kde_sample state"),
                                      ("_kde_cells2_union", bytes(real), "not a _kde_cells2 state")):
            with pytest.raises(psycopg.Error, match=message):
                conn.execute(f"SELECT {union}(s) FROM (VALUES (%s::bytea), (%s::bytea)) v(s)", (bytes(real), state)
                             if union == "_kde_cells_union" else (state, state))
        with pytest.raises(psycopg.Error, match="non-aggregate context"):
            conn.execute("SELECT _kde_cells_combine(%s::bytea, %s::bytea)", (bytes(real), bytes(real)))
        # the aggregates themselves work for everyone
        state = conn.execute("SELECT _kde_cells(x, '{0,1}', '{}', 1, 256) FROM (VALUES (0.5::float8)) v(x)").fetchone()[0]
        assert decode_cells(1, state, 2, 0, 1.0).cell_rows.tolist() == [1.0]


def test_the_sample_is_repeatable_and_counts_every_row(db, table):
    rng = np.random.default_rng(8)
    n = 50000
    x = np.round(rng.lognormal(3.0, 1.0, n), 2)
    x[rng.random(n) < 0.02] = np.nan  # NULLs
    load(db, table, {"x": x}, {"x": "numeric(12,2)"})
    db.execute(f'UPDATE "{table}" SET x = \'NaN\' WHERE ctid = \'(0,1)\'')  # one NaN
    query = f'SELECT count(*), _kde_sample(x, ctid, tableoid, 0.1, 7) FROM "{table}"'
    results = []
    for settings in (PARALLEL, SERIAL):
        for s_ in settings:
            db.execute(s_)
        try:
            rows, state = db.execute(query).fetchone()
            plan = "\n".join(r[0] for r in db.execute("EXPLAIN " + query).fetchall())
        finally:
            db.execute("RESET ALL")
        assert ("Partial Aggregate" in plan) == (settings is PARALLEL)
        results.append(decode_sample(rows, state, 10 ** 6))
    parallel, serial = results
    np.testing.assert_array_equal(np.sort(parallel.values), np.sort(serial.values))  # the same rows
    values = np.array([r[0] for r in db.execute(f'SELECT x::float8 FROM "{table}" WHERE x IS NOT NULL')])
    finite = values[np.isfinite(values)]
    assert (parallel.rows, parallel.non_null, parallel.non_finite) == (n, len(values), 1)
    assert (parallel.lo, parallel.hi) == (finite.min(), finite.max())
    assert abs(len(parallel.values) / len(finite) - 0.1) < 0.01 and np.isin(parallel.values, finite).all()
    other = decode_sample(n, db.execute(f'SELECT _kde_sample(x, ctid, tableoid, 0.1, 8) FROM "{table}"').fetchone()[0], 10 ** 6)
    assert not np.array_equal(np.sort(other.values), np.sort(parallel.values))  # another seed, other rows


@pytest.mark.parametrize("aggregate", ["_kde_sample(x, ctid, tableoid, 0.5, 1)",
                                       "_kde_cells(x, '{0,1}'::float8[], '{}'::float8[], 1, 256)"])
def test_parallel_workers_that_read_no_row(db, table, aggregate):
    # Workers whose rows all fail the filter send empty states: their combine must stay empty, not crash.
    load(db, table, {"x": np.arange(50000, dtype=float)})
    for s_ in PARALLEL:
        db.execute(s_)
    try:
        plan = "\n".join(r[0] for r in db.execute(f'EXPLAIN SELECT {aggregate} FROM "{table}" WHERE x > 1e300'))
        assert "Partial Aggregate" in plan
        assert db.execute(f'SELECT {aggregate} FROM "{table}" WHERE x > 1e300').fetchone()[0] is None
        db.execute("SET parallel_leader_participation = off")
        state = db.execute(f'SELECT {aggregate} FROM "{table}" WHERE x < 10').fetchone()[0]
        assert state is not None
    finally:
        db.execute("RESET ALL")


@pytest.mark.parametrize("type_, period, bins, step", [("timestamptz", 86400.0, 48, 1.0),
                                                       ("timestamp", 86400.0, 48, 0.0),
                                                       ("date", 604800.0, 7, 86400.0)])
def test_the_profile_count_equals_its_reference_in_parallel_and_serial_plans(db, table, type_, period, bins, step):
    # _kde_phases (extension/profile.c) counts a time column's periodic profile over every row in the refresh's
    # scan: the same bins as cells.period_counts, numpy's mod and truncation, also before 1970 (negative
    # epoch seconds), at a bin's edge, with infinities and NULLs counted nowhere; integer counts, the same in
    # parallel and serial plans.
    rng = np.random.default_rng(31)
    n = 60000
    secs = np.floor(rng.uniform(-3e9, 3e9, n)) + np.where(rng.random(n) < 0.1, 0.25, 0.0)
    db.execute(sql.SQL("CREATE TABLE {} (t {})").format(sql.Identifier(table), sql.SQL(type_)))
    with db.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(table))) as cp:
        for v in secs.tolist():
            cp.write_row([np.datetime_as_string(np.datetime64(int(round(v * 1e6)), "us")) +
                          ("+00" if type_ == "timestamptz" else "")])
        for extra in ("1969-12-31 23:30:00", "2024-03-01 00:00:00", "infinity", "-infinity", None):
            cp.write_row([None if extra is None else extra + ("+00" if type_ == "timestamptz" and "inf" not in extra else "")])
    db.execute("SET TimeZone = 'Asia/Kathmandu'")  # a timestamptz's epoch is absolute; the others' wall-clock
    try:
        values = np.array([r[0] for r in db.execute(sql.SQL("SELECT extract(epoch FROM t)::float8 FROM {} WHERE t IS "
                                                             "NOT NULL").format(sql.Identifier(table)))], dtype=float)
        query = sql.SQL("SELECT _kde_phases(t, {}::float8, {}, {}::float8) FROM {}").format(
            sql.Literal(period), sql.Literal(bins), sql.Literal(step / 2), sql.Identifier(table)).as_string(db)
        states = []
        for settings in (PARALLEL, SERIAL):
            for s_ in settings:
                db.execute(s_)
            plan = "\n".join(r[0] for r in db.execute("EXPLAIN " + query).fetchall())
            assert ("Partial Aggregate" in plan) == (settings is PARALLEL)
            states.append(bytes(db.execute(query).fetchone()[0]))
    finally:
        db.execute("RESET ALL")
    assert states[0] == states[1]
    got = decode_phases(states[0], (period, bins, step))
    np.testing.assert_array_equal(got, period_counts(values, period, bins, step))
    assert got.sum() == np.isfinite(values).sum() == n + 2 and np.isinf(values).sum() == 2


@pytest.mark.parametrize("args, message", [
    ("NULL, 48, 0.5", "a period, bins and a shift"),
    ("86400, 0, 0.5", "positive finite period, 1 to 100000 bins"),
    ("'NaN', 48, 0.5", "positive finite period"),
    ("-86400, 48, 0.5", "positive finite period"),
    ("86400, 48, 'Infinity'", "a finite shift"),
    ("86400, 100001, 0", "1 to 100000 bins"),
])
def test_the_profile_count_refuses_bad_arguments(db, args, message):
    with pytest.raises(psycopg.Error, match=f"pg_kde: _kde_phases needs .*{message}"):
        db.execute(f"SELECT _kde_phases(t, {args}) FROM (VALUES (now())) v(t)")


def test_the_profile_count_checks_every_state_it_takes(db, login_role):
    # As _kde_cells's support functions: any role may call them, and every state handed to them is checked.
    role, dsn = login_role()
    real = bytes(db.execute("SELECT _kde_phases(t, 86400, 48, 0.5) FROM (VALUES (now())) v(t)").fetchone()[0])
    other = bytes(db.execute("SELECT _kde_phases(t, 86400, 24, 0.5) FROM (VALUES (now())) v(t)").fetchone()[0])
    counts = len(real) - 48 * 8
    negative = real[:counts] + (-5).to_bytes(8, "little", signed=True) * 48
    full = real[:counts] + (2 ** 63 - 1).to_bytes(8, "little", signed=True) * 48
    with psycopg.connect(dsn, autocommit=True) as conn:
        for initcond, message in (("\\x00000000", "not a _kde_phases state"),
                                  ("\\x" + real[:-1].hex(), "not a _kde_phases state"),
                                  ("\\x" + other.hex(), "of another period, bins or shift"),
                                  ("\\x" + negative.hex(), "a negative or overflowing count"),
                                  ("\\x" + full.hex(), "a negative or overflowing count")):
            conn.execute("DROP AGGREGATE IF EXISTS pg_temp.evil(timestamptz, float8, int4, float8)")
            conn.execute("CREATE AGGREGATE pg_temp.evil(timestamptz, float8, int4, float8) (SFUNC = _kde_phases_step, "
                         f"STYPE = bytea, INITCOND = '{initcond}')")
            with pytest.raises(psycopg.Error, match=message):
                conn.execute("SELECT pg_temp.evil(t, 86400, 48, 0.5) FROM (VALUES (now())) v(t)")
        for a, b, message in ((real, other, "different periods, bins or shifts do not combine"),
                              (real, real[:-3], "not a _kde_phases state"),
                              (real, negative, "a negative or overflowing count"),
                              (negative, real, "a negative or overflowing count"),
                              (full, real, "a negative or overflowing count")):
            with pytest.raises(psycopg.Error, match=message):
                conn.execute("SELECT _kde_phases_union(s ORDER BY i) FROM (VALUES (%s::bytea, 1), (%s::bytea, 2)) v(s, i)",
                             (a, b))
        with pytest.raises(psycopg.Error, match="non-aggregate context"):
            conn.execute("SELECT _kde_phases_combine(%s::bytea, %s::bytea)", (real, real))
        both = conn.execute("SELECT _kde_phases_union(s) FROM (VALUES (%s::bytea), (%s::bytea), (NULL)) v(s)",
                            (real, real)).fetchone()[0]
        assert decode_phases(both, (86400.0, 48, 1.0)).sum() == 2


def test_a_profile_count_with_a_negative_count_is_refused_by_its_reader():
    header = bytes(4) + __import__("struct").pack("=IIiidd", 0x5044454B, 1, 2, 0, 86400.0, 0.5)
    good = header + (3).to_bytes(8, "little", signed=True) * 2
    assert decode_phases(good, (86400.0, 2, 1.0)).tolist() == [3.0, 3.0]
    with pytest.raises(ValueError, match="negative count"):
        decode_phases(header + (-1).to_bytes(8, "little", signed=True) * 2, (86400.0, 2, 1.0))
    with pytest.raises(ValueError, match="another version, period or size"):
        decode_phases(good, (86400.0, 2, 2.0))
