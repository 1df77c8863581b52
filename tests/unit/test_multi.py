"""pg_kde.synopsis.multi (synopses of 3 to 16 columns) against brute force on the same sample: each column's
distribution function and its inverse, the points' ranks, boxes counted unsmoothed, the diagonal LSCV widths,
and the build's refusals."""

import numpy as np
import pytest

from pg_kde import bandwidth
from pg_kde._errors import UserError
from pg_kde.synopsis import multi


def sample_table(rng, n=3000):
    z = rng.standard_normal((n, 3))
    table = np.column_stack([
        np.round(np.exp(2 + z[:, 0]), 2),                      # cents
        np.floor(5 * (z[:, 0] + z[:, 1])),                     # integers, correlated
        np.minimum(np.floor(rng.exponential(1.2, n)), 5),      # 6 values
        z[:, 2] + 0.5 * z[:, 0],                               # continuous
    ])
    table[rng.random(n) < 0.1, 3] = np.nan                     # NULLs
    return table


@pytest.mark.parametrize("cap", [10_000, 40])
def test_the_distribution_function_is_the_samples(cap):
    rng = np.random.default_rng(1)
    x = np.round(rng.gamma(2.0, 3.0, 2000), 1)
    x[rng.random(2000) < 0.05] = np.nan
    knots = multi.make_knots(x, cap)
    s = np.sort(x[~np.isnan(x)])
    assert knots.complete == (cap >= len(np.unique(s)))
    probes = np.concatenate([np.unique(s), np.unique(s) + 0.05, [s[0] - 1, s[-1] + 1]])
    for p in probes:
        below, upto = np.mean(s < p), np.mean(s <= p)
        if knots.complete or p in knots.values or p < s[0] or p > s[-1]:
            assert knots.cdf(p, True) == pytest.approx(below, abs=1e-15)
            assert knots.cdf(p, False) == pytest.approx(upto, abs=1e-15)
        else:  # between kept knots: linear, within the gap's rows
            i = np.searchsorted(knots.values, p)
            assert knots.upto[i - 1] / len(s) <= knots.cdf(p, False) <= knots.below[i] / len(s)
    # vectorised and scalar agree
    np.testing.assert_array_equal(knots.cdf(probes, False), [knots.cdf(p, False) for p in probes])


def test_ranks_sit_strictly_inside_their_values_band_and_invert():
    rng = np.random.default_rng(2)
    table = sample_table(rng)
    knots = [multi.make_knots(table[:, j], 10_000) for j in range(table.shape[1])]
    codes = multi.rank_codes(table, knots)
    np.testing.assert_array_equal(codes, multi.rank_codes(table, knots))  # the same sample, the same codes
    for j, k in enumerate(knots):
        known = ~np.isnan(table[:, j])
        assert np.all(codes[~known, j] == multi.CODE_NULL)
        u = codes[known, j] / multi.CODE_SCALE
        x = table[known, j]
        assert np.all(u > k.cdf(x, True)) and np.all(u < k.cdf(x, False))
        assert all(k.value(ui) == xi for ui, xi in zip(u[:200], x[:200]))


def row_of(built):
    return built.payload()


def test_unsmoothed_boxes_count_the_samples_rows(monkeypatch):
    """With every width 0 a box's estimate is N/m times the sampled rows inside (NULLs outside), for bounds
    on values, between values and open sides."""
    rng = np.random.default_rng(3)
    table = sample_table(rng)
    monkeypatch.setattr(multi, "choose_widths", lambda U, smooth, *a, **k: (np.zeros(U.shape[1]), 0))
    built = multi.build_nd(table, 30_000, 1 << 20, "auto", "reference", 500)
    assert built.m == len(table) and all(k.complete for k in built.knots[:3])
    row = row_of(built)
    for _ in range(200):
        lo, hi = [], []
        for j in range(4):
            col = table[~np.isnan(table[:, j]), j]
            a, b = np.sort(rng.choice(col, 2))
            if rng.random() < 0.3:
                a = a + 0.001
            lo.append(None if rng.random() < 0.25 else float(a))
            hi.append(None if rng.random() < 0.25 else float(b))
        keep = np.ones(len(table), bool)
        for j in range(4):
            if lo[j] is not None or hi[j] is not None:
                keep &= ~np.isnan(table[:, j])
                keep &= table[:, j] >= (lo[j] if lo[j] is not None else -np.inf)
                keep &= table[:, j] <= (hi[j] if hi[j] is not None else np.inf)
        est, var = multi.box(row, built.widths, 30_000, lo, hi)
        assert est == pytest.approx(30_000 * keep.mean(), abs=1e-6)
        # every row of the pool a point: a simple random sample of the table's 30,000 rows, without
        # replacement; without pool_rows (before 0.12.0), with replacement
        p, m = keep.mean(), len(table)
        assert var == pytest.approx(30_000**2 * (1 / m - 1 / 30_000) * p * (1 - p) * m / (m - 1), rel=1e-9, abs=1e-6)
        _, old = multi.box(dict(row, pool_rows=None), built.widths, 30_000, lo, hi)
        assert old == pytest.approx(30_000**2 * p * (1 - p) / m, rel=1e-9, abs=1e-6)
        # a sum reads each point's own value back (complete knots)
        s, _ = multi.box(row, built.widths, 30_000, lo, hi, sum_col=0)
        assert s == pytest.approx(30_000 / len(table) * table[keep, 0].sum(), rel=1e-12)


def test_every_side_open_is_every_row():
    rng = np.random.default_rng(4)
    built = multi.build_nd(sample_table(rng), 123_456, 65536, "auto", "reference", 400)
    est, var = multi.box(row_of(built), built.widths, 123_456, [None] * 4, [None] * 4)
    assert est == pytest.approx(123_456, rel=1e-12) and var == pytest.approx(0, abs=1e-6)


def test_diagonal_widths_minimise_the_lscv_criterion():
    rng = np.random.default_rng(5)
    z = rng.standard_normal((400, 3)) @ np.array([[1, 0.5, 0], [0, 1, 0.3], [0, 0, 1]])
    U = (np.argsort(np.argsort(z, axis=0), axis=0) + 0.5) / 400
    h = multi._diagonal_lscv(U, "reference")
    best = bandwidth.lscv_H_objective(U, np.diag(h**2), backend="reference")
    assert np.all(h > 1e-3)
    for j in range(3):
        for f in (0.9, 1.1):
            g = h.copy()
            g[j] = min(g[j] * f, multi.MAX_WIDTH)  # (a width at the cap may only shrink)
            assert best <= bandwidth.lscv_H_objective(U, np.diag(g**2), backend="reference") * (1 - 1e-12)


@pytest.mark.parametrize("columns, kwargs, message", [
    (2, {}, "3 to 16 columns"),
    (17, {}, "3 to 16 columns"),
    (4, {"method": "plugin"}, "unknown method"),
    (4, {"budget": 1100}, "leaves room for"),
])
def test_the_build_refuses_what_it_cannot_describe(columns, kwargs, message):
    rng = np.random.default_rng(6)
    table = rng.standard_normal((500, columns))
    args = {"budget": 65536, "method": "auto", **kwargs}
    with pytest.raises(UserError, match=message):
        multi.build_nd(table, 500, args["budget"], args["method"], "reference", 400)


def test_a_table_of_too_few_rows_is_named_as_the_reason():
    with pytest.raises(UserError, match="the table has 2 row.s. to describe; a synopsis of 3 columns needs at least 8"):
        multi.build_nd(np.array([[1.0, 2.0, 3.0], [2.0, 3.0, 4.0]]), 2, 262144, "auto", "reference", 500)


def test_infinite_values_are_refused():
    table = np.random.default_rng(7).standard_normal((500, 3))
    table[3, 1] = np.inf
    with pytest.raises(UserError, match="NaN or infinite"):
        multi.build_nd(table, 500, 65536, "auto", "reference", 400)


def test_balanced_points_vary_less_than_a_random_sample_in_a_box():
    """The points are a spatially balanced subsample of the pool (every k-th along the Z-order of the ranks): a
    box's share of them is nearer the pool's than a simple random sample's of the same size."""
    rng = np.random.default_rng(11)
    pool = rng.standard_normal((40000, 4)) @ np.array([[1, 0.6, 0, 0], [0, 1, 0.3, 0], [0, 0, 1, 0], [0, 0, 0.5, 1]])
    m = 2000
    picks = multi.balanced_picks(pool, m)
    assert len(np.unique(picks)) == m  # distinct rows, in the curve's order
    assert np.all(np.diff(multi.morton_keys(multi.pool_ranks(pool))[picks].astype(np.float64)) >= 0)
    assert np.array_equal(picks, multi.balanced_picks(pool.copy(), m))  # the same pool: the same points
    random = rng.choice(len(pool), m, replace=False)
    errors = {"balanced": [], "random": []}
    for _ in range(300):
        centre = pool[rng.integers(len(pool))]
        half = rng.uniform(0.3, 1.5, 4)
        inside = np.all(np.abs(pool - centre) <= half, axis=1)
        if inside.mean() < 0.01:
            continue
        for name, rows in (("balanced", picks), ("random", random)):
            errors[name].append(abs(inside[rows].mean() / inside.mean() - 1))
    assert len(errors["balanced"]) > 100
    assert np.median(errors["balanced"]) < 0.75 * np.median(errors["random"])  # (0.64 here; sorted by the first column: 0.93)


def test_a_pool_with_nulls_and_sixteen_columns_gives_distinct_points():
    rng = np.random.default_rng(3)
    pool = rng.standard_normal((5000, 16))
    pool[rng.random(pool.shape) < 0.1] = np.nan
    picks = multi.balanced_picks(pool, 700)
    assert len(np.unique(picks)) == 700
    assert multi.morton_keys(multi.pool_ranks(pool)).dtype == np.uint64
    assert multi.pool_rows(21844, 6) == 21844 * multi.POOL_FACTOR
    assert multi.pool_rows(21844, 16) == multi.POOL_VALUES // 16


def test_a_merge_of_partitions_answers_as_a_build_of_their_union():
    """merge_nd: each partition's points read back (categories by label), in proportion to its rows, the
    pool of one build; its boxes are near the exact counts of the union, its rows exact, its labels every
    partition's."""
    rng = np.random.default_rng(1)

    def part(n, shift, labels):
        x = rng.standard_normal(n) + shift
        return np.column_stack([x, x + rng.standard_normal(n), np.round(rng.exponential(3, n)),
                                rng.integers(0, len(labels), n).astype(float)])

    labels = [["a", "b", "c"], ["b", "d"], ["a", "c", "e"]]
    parts = [part(24000, 0, labels[0]), part(12000, 2, labels[1]), part(2000, -1, labels[2])]
    builds = [multi.build_nd(p, len(p), 32768, "auto", "reference", 1000, labels=[None] * 3 + [lab])
              for p, lab in zip(parts, labels)]
    read = [multi.decode_points(b) for b in builds]
    assert np.array_equal(np.isnan(read[0][0]), builds[0].codes == multi.CODE_NULL)
    merged = multi.merge_nd([(v, lab, b.n_rows) for (v, lab), b in zip(read, builds)], 32768, "auto", "reference", 1000)
    assert merged.n_rows == 38000 and merged.labels[3] == ["a", "b", "c", "d", "e"]
    names = [[lab[int(c)] for c in p[:, 3]] for p, lab in zip(parts, labels)]
    whole = np.concatenate(parts)
    group = np.array(sum(names, []))
    row = merged.payload()
    for lo, hi in [([0, 0, None, None], [1.5, 3, None, None]), ([None, None, 2, None], [None, None, 6, None]),
                   ([-1, None, 0, None], [2, None, 3, None])]:
        inside = np.ones(len(whole), bool)
        for j in range(3):
            if lo[j] is not None:
                inside &= (whole[:, j] >= lo[j]) & (whole[:, j] <= hi[j])
        est, _ = multi.box(row, merged.widths, merged.n_rows, lo, hi)
        assert est == pytest.approx(inside.sum(), rel=0.06)
        by, _ = multi.box(row, merged.widths, merged.n_rows, lo, hi, group_col=3)
        for g, label in enumerate(merged.labels[3]):
            exact = (inside & (group == label)).sum()
            if exact > 1000:
                assert by[g] == pytest.approx(exact, rel=0.15)
