"""Merging the 1-D synopses of a table's parts (pg_kde.synopsis.merge): the merged cells' counts and sums are
exact, the hard bounds of every query hold, parts on disjoint ranges keep their boundaries, parts on
overlapping ranges built on the whole table's grid keep it, and heavy values add up."""

import dataclasses
import warnings

import numpy as np
import pytest

from pg_kde.synopsis import ArrayTableReader, Requested, build_1d, select_bandwidth
from pg_kde.synopsis.cells import DAY_PROFILE, cells_for_budget, make_profile, period_counts, profile_bytes
from pg_kde.synopsis.merge import merge_1d, merged_step
from pg_kde.synopsis.query import range_1d


def quiet(sample, method, backend, required=True, scale=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return select_bandwidth(sample, method, backend, required, scale)


def built(x, hint=None, budget=8192):
    return build_1d(ArrayTableReader((np.asarray(x, dtype=float),)), Requested("auto", 20000, None, "auto", budget),
                    quiet, grid_hint=hint)


def exact_cells(s, x):
    """The merged payload's cumulative counts and sums equal the rows' own, cell by cell."""
    x = x[~np.isnan(x)]
    rest = x[~np.isin(x, s.atom_values)]
    g = np.asarray(s.grid)
    c = np.clip(np.searchsorted(g, rest, side="right") - 1, 0, len(g) - 2)
    np.testing.assert_array_equal(np.concatenate([[0], np.cumsum(np.bincount(c, minlength=len(g) - 1))]),
                                  s.cell_cum_count)
    sums = np.concatenate([[0.0], np.cumsum(np.bincount(c, weights=rest, minlength=len(g) - 1))])
    np.testing.assert_allclose(s.cell_cum_sum, sums, rtol=1e-12, atol=1e-9 * np.abs(rest).sum())
    assert g[0] <= rest.min() and rest.max() <= g[-1]


def bounds_hold(s, x, rng, k=300):
    x = np.sort(x[~np.isnan(x)])
    values = np.unique(x)
    errors = []
    for i in range(k):
        lo, hi = (np.sort(rng.choice(values, 2)) if i % 2 else np.sort(rng.uniform(x[0], x[-1], 2)))
        for order in (0, 1):
            inside = x[(x >= lo) & (x <= hi)]
            truth = len(inside) if order == 0 else inside.sum()
            r = range_1d(s.payload(), lo, hi, order)
            slack = 1e-9 * max(1.0, abs(truth)) + (1e-9 * np.abs(x).sum() if order else 0)
            assert r.low - slack <= truth <= r.high + slack, (lo, hi, order, truth, r)
            if order == 0 and truth > 0:
                errors.append(abs(r.estimate - truth) / truth)
    return float(np.median(errors))


def test_parts_on_disjoint_ranges_keep_every_boundary(rng):
    x = np.round(rng.lognormal(3.0, 1.0, 60000), 2)  # cents, partitioned by value (like a time key)
    cuts = np.quantile(x, [0.3, 0.8])
    parts = [x[x < cuts[0]], x[(x >= cuts[0]) & (x < cuts[1])], x[x >= cuts[1]]]
    pieces = [built(p) for p in parts]
    merged = merge_1d(pieces, 8192 * 3)
    exact_cells(merged, x)
    assert merged.n_rows == len(x) and merged.step == 0.01
    assert merged.grid_size - 1 >= sum(p.grid_size - 1 for p in pieces) - 3  # all kept (the gaps between parts)
    assert bounds_hold(merged, x, rng) < 0.002
    # within a smaller budget: thinned to fit, still exact
    small = merge_1d(pieces, 8192)
    assert small.grid_size - 1 <= cells_for_budget(8192, len(small.atom_values))
    exact_cells(small, x)
    bounds_hold(small, x, rng, 100)


def test_parts_on_overlapping_ranges_share_the_whole_tables_grid(rng):
    x = rng.gamma(2.0, 3.0, 80000)
    x[rng.random(80000) < 0.1] = 5.0  # a heavy value in every part
    part_of = rng.integers(0, 4, len(x))  # partitioned by something else (e.g. a date): ranges overlap
    whole = built(x)
    pieces = [built(x[part_of == k], hint=np.asarray(whole.grid)) for k in range(4)]
    merged = merge_1d(pieces, 8192)
    exact_cells(merged, x)
    assert 5.0 in merged.atom_values and merged.heavy_rows == (x == 5.0).sum()
    # the shared grid survives: most of the whole table's boundaries are the merge's
    assert np.isin(whole.grid, merged.grid).mean() > 0.9
    err_merged, err_whole = bounds_hold(merged, x, rng), bounds_hold(whole, x, np.random.default_rng(1))
    assert err_merged < max(3 * err_whole, 0.003)
    # without the hint the parts share no boundary: still exact, but coarse
    alone = merge_1d([built(x[part_of == k]) for k in range(4)], 8192)
    exact_cells(alone, x)
    bounds_hold(alone, x, rng, 100)
    assert alone.grid_size < merged.grid_size


def test_frequency_tables_merge_and_overflow_into_cells(rng):
    x = rng.integers(0, 400, 20000).astype(float)
    pieces = [built(x[:10000]), built(x[10000:])]
    assert all(p.grid_size == 0 for p in pieces)  # each an exact frequency table
    merged = merge_1d(pieces, 8192)
    assert merged.grid_size == 0 and merged.heavy_rows == len(x)
    assert range_1d(merged.payload(), 3, 17, 0).estimate == ((x >= 3) & (x <= 17)).sum()
    tight = merge_1d(pieces, 1024)  # 400 values do not fit in 1 KB, packed or not: the rest become cells
    assert 0 < len(tight.atom_values) < 400
    exact_cells(tight, x)
    bounds_hold(tight, x, rng, 60)


def test_packed_frequency_tables_merge_within_a_small_budget(rng):
    # 40 values as arrays (24 bytes each) would not fit beside the row in 1 KB; packed (2-4 bytes each) they do
    x = rng.integers(0, 40, 20000).astype(float)
    merged = merge_1d([built(x[:10000]), built(x[10000:])], 1024)
    stored = merged.payload()
    assert merged.grid_size == 0 and stored["atom_values"] == [] and 0 < len(stored["atom_pack"]) <= 200
    for lo, hi in ((3, 17), (0, 0), (39, 39), (-5, 100), (2.5, 7.5)):
        inside = (x >= lo) & (x <= hi)
        for order, exact in ((0, inside.sum()), (1, x[inside].sum())):
            r = range_1d(stored, lo, hi, order)
            assert r.estimate == r.low == r.high == exact


def test_merged_step():
    assert merged_step([0.01, 0.01]) == 0.01 and merged_step([1.0, 0.01]) == 0.01
    assert merged_step([0.01, 0.0]) == 0.0 and merged_step([60.0, 3600.0]) == 60.0 and merged_step([]) == 0.0
    assert merged_step([0.25, 0.1]) == 0.0


def test_empty_parts_are_left_out(rng):
    x = rng.normal(size=5000)
    merged = merge_1d([built(x)], 8192)
    exact_cells(merged, x)
    with pytest.raises(Exception):
        built(np.array([np.nan, np.nan]))


def test_a_frequency_tables_lattice_counts_in_the_merge(rng):
    # an integer part (step 1, in cells) and a part of 2,500 values k/2 + 1/4 (on the 0.01 lattice), a
    # frequency table: its values overflow the merge's room for heavy values (a quarter of the budget, where
    # their pack takes 5 KB) into cells, which must not be read on the integer lattice
    a = rng.integers(0, 100000, 20000).astype(float)
    b = np.repeat(np.arange(2500) / 2 + 0.25, 4)
    pieces = [built(a), built(b)]
    assert pieces[0].step == 1.0 and pieces[1].grid_size == 0
    merged = merge_1d(pieces, 8192)
    assert merged.step == 0.01
    x = np.concatenate([a, b])
    exact_cells(merged, x)
    for v in (42.75, 100.25):
        r = range_1d(merged.payload(), v, v, 0)
        assert r.low <= (x == v).sum() <= r.high


def test_periodic_profiles_merge_as_the_profile_of_every_row(rng):
    """Months of a daily pattern (partitions by time): each part's profile counts its rows (0.16.0), and the
    merge keeps the profile of every row of the union (float4 shares), stays exact cell by cell and within the
    budget's cells; a part without a profile drops it."""
    day = rng.integers(0, 120, 90000) * 86400
    peak = np.mod(np.floor(46800 + 12600 * rng.standard_normal(90000)), 86400)
    x = 1704067200.0 + day + np.where(rng.random(90000) < 0.75, peak, np.floor(rng.uniform(0, 86400, 90000)))
    cuts = 1704067200.0 + np.array([40, 80]) * 86400
    pieces = [x[x < cuts[0]], x[(x >= cuts[0]) & (x < cuts[1])], x[x >= cuts[1]]]
    requested = Requested("auto", 20000, None, "auto", 8192)
    whole = build_1d(ArrayTableReader((x,)), requested, quiet, period=DAY_PROFILE)
    parts = [build_1d(ArrayTableReader((p,)), requested, quiet, grid_hint=np.asarray(whole.grid), period=DAY_PROFILE)
             for p in pieces]
    assert all(p.period == 86400.0 and p.profile[-1] == p.kde_rows for p in parts)
    merged = merge_1d(parts, 8192)
    assert merged.period == 86400.0 and merged.profile[-1] == merged.kde_rows == len(x)
    np.testing.assert_allclose(merged.profile, make_profile(period_counts(x, 86400.0, 48, 1.0)), rtol=0, atol=2e-7)
    assert merged.grid_size - 1 <= cells_for_budget(8192 - profile_bytes(DAY_PROFILE[1]), 0)
    exact_cells(merged, x)
    assert bounds_hold(merged, x, rng) < 0.01
    flat = build_1d(ArrayTableReader((pieces[2],)), requested, quiet, grid_hint=np.asarray(whole.grid))
    assert flat.period == 0.0 and merge_1d(parts[:2] + [flat], 8192).period == 0.0


def test_heavy_values_the_merge_puts_back_in_cells_join_the_profile(rng):
    """Parts off a lattice (microseconds) with ten heavy values each, merged at 2 KB: the values the merge
    has no room for go back into the cells, and into the profile's bins (a red team: the merged profile left
    their 9,000 rows out, its row count 30,000 against 39,000 cell rows)."""
    day = rng.integers(0, 90, 60000) * 86400
    peak = np.mod(46800 + 12600 * rng.standard_normal(60000), 86400)
    x = 1704067200.0 + day + np.floor(np.where(rng.random(60000) < 0.75, peak, rng.uniform(0, 86400, 60000)) * 1e6) / 1e6
    cuts = 1704067200.0 + np.array([30, 60]) * 86400
    pieces = []
    for i, (a, b) in enumerate(((-np.inf, cuts[0]), (cuts[0], cuts[1]), (cuts[1], np.inf))):
        part = x[(x >= a) & (x < b)]
        heavy = 1704067200.0 + (30 * i + 3) * 86400 + np.arange(10) * 17 * 3600 + 0.123457
        pieces.append(np.concatenate([part, np.repeat(heavy, 1000)]))
    requested = Requested("auto", 20000, None, "auto", 2048)
    whole = np.concatenate(pieces)
    hint = build_1d(ArrayTableReader((whole,)), requested, quiet, period=DAY_PROFILE).grid
    parts = [build_1d(ArrayTableReader((p,)), requested, quiet, grid_hint=np.asarray(hint), period=DAY_PROFILE)
             for p in pieces]
    assert all(p.period == 86400.0 and p.heavy_rows >= 10000 for p in parts)
    merged = merge_1d(parts, 2048)
    assert merged.period == 86400.0 and merged.heavy_rows < sum(p.heavy_rows for p in parts)  # some demoted
    assert merged.profile[-1] == merged.kde_rows == len(whole) - merged.heavy_rows
    rest = whole[~np.isin(whole, merged.atom_values)]
    np.testing.assert_allclose(merged.profile, make_profile(period_counts(rest, 86400.0, 48, 0.0)), rtol=0, atol=2e-7)
    exact_cells(merged, whole)


def test_merged_frequency_tables_that_do_not_pack_stay_within_the_budget():
    """Parts whose heavy values are arrays (their index sums pass 2^53: 1e12 + i), merged with more values
    than the budget holds: the demoted values' cells fit beside the kept ones (0.8.0: 2,088 bytes at 2,048)."""
    from pg_kde.synopsis.cells import ATOM_BYTES, BOUNDARY_BYTES, ROW_BYTES_1D

    a = 1e12 + np.repeat(np.arange(50.0), 300)
    b = 1e12 + np.repeat(np.arange(25.0, 75.0), 300)
    pieces = [built(a, budget=2048), built(b, budget=2048)]
    assert all(p.grid_size == 0 and p.payload()["atom_pack"] == b"" for p in pieces)  # arrays: no pack
    merged = merge_1d(pieces, 2048)
    stored = merged.payload()
    size = ROW_BYTES_1D + ATOM_BYTES * len(stored["atom_values"]) + len(stored["atom_pack"]) \
        + BOUNDARY_BYTES * merged.grid_size
    assert merged.grid_size >= 2 and size <= 2048, size
    exact_cells(merged, np.concatenate([a, b]))


def test_merged_heavy_values_are_whole_only_where_no_part_has_them_in_a_cell(rng, monkeypatch):
    """A merged synopsis' heavy values hold every row of their values (heavy_whole, which lets the queries take
    their slots out of a cut cell's shape) where every part's do and no part holds one of them in a cell; a
    value heavy in one part and among another's cells keeps that part's rows in the merged cells. (The parts
    are built with the scan's default tail, as where a sample's estimate of its cells falls short: since
    0.31.0 their scans, sized for their cells, keep every value their samples missed, and each part here is
    its exact table.)"""
    from pg_kde.synopsis import build as build_module
    from pg_kde.synopsis.reader import TAIL_VALUES

    monkeypatch.setattr(build_module, "_scan_tail", lambda *args: TAIL_VALUES)

    def zipf(n, seed):
        u = np.random.default_rng(seed).random(n)
        return np.minimum(np.floor(1 / np.power(1 - u, 1 / 1.2)), 100000.0)

    def sampled(x, hint=None):
        return build_1d(ArrayTableReader((x,), blocks=(157, 128)), Requested("auto", 50000, None, "auto", 2048),
                        quiet, grid_hint=hint)

    a, b = zipf(400_000, 1), zipf(400_000, 2)
    whole = sampled(np.concatenate([a, b]))
    hint = np.asarray(whole.grid)
    pa, pb = sampled(a, hint), sampled(b, hint)
    assert whole.heavy_whole and pa.heavy_whole and pb.heavy_whole
    # the sample of each part sees other mid-tail values: some heavy in one part sit in the other's cells
    assert set(pa.atom_values) != set(pb.atom_values)
    merged = merge_1d([pa, pb], 65536)  # (room for every heavy value)
    assert len(merged.atom_values) == len(set(pa.atom_values) | set(pb.atom_values))
    assert merged.heavy_whole is False
    # within 2 KB only the largest stay heavy, the bulk's, heavy in both parts: whole
    assert merge_1d([pa, pb], 2048).heavy_whole is True
    # (exact_cells reads every row off the heavy values as a cell's: not so for those partly in cells)
    assert merged.kde_rows + merged.heavy_rows == len(a) + len(b)
    bounds_hold(merged, np.concatenate([a, b]), rng, 100)
    # parts on disjoint ranges: no part holds another's heavy values in a cell
    x = np.round(rng.lognormal(3.0, 1.0, 60000), 2)
    low, high = built(x[x < 30.0]), built(x[x >= 30.0])
    assert low.heavy_whole and high.heavy_whole and low.atom_values and high.atom_values
    joined = merge_1d([low, high], 8192 * 2)
    assert joined.heavy_whole is True
    exact_cells(joined, x)
    # a part stored before 0.17.0 does not say: nor does the merge
    assert merge_1d([low, dataclasses.replace(high, heavy_whole=None)], 8192 * 2).heavy_whole is False


def test_a_merged_synopsis_takes_its_parts_largest_doubt_weight(rng):
    """The merged cells' errors are not measured: the merge keeps the largest doubt weight its celled parts'
    builds calibrated (a part not calibrated weighs 1), and none where no part is calibrated."""
    x = np.round(rng.lognormal(3.0, 1.5, 300000), 2)
    low, high = built(x[x < 20.0], budget=2048), built(x[x >= 20.0], budget=2048)
    assert low.doubt_weight is not None and high.doubt_weight is not None  # (calibrated by their builds)
    assert merge_1d([low, high], 4096).doubt_weight == max(low.doubt_weight, high.doubt_weight)
    for a, b, want in ((0.4, 2.2, 2.2), (0.4, None, 1.0), (1.7, None, 1.7), (None, None, None)):
        merged = merge_1d([dataclasses.replace(low, doubt_weight=a), dataclasses.replace(high, doubt_weight=b)], 4096)
        assert merged.doubt_weight == want, (a, b)
