"""Packed heavy values and pairs (pg_kde.synopsis.packing): lossless on a lattice, exact sums, refusals, and
malformed packs rejected. The server's decoder (extension/atoms.c) is checked against this one in tests/sql."""

from fractions import Fraction

import math
import numpy as np
import pytest

from pg_kde.synopsis.packing import (PACK_LIMIT, PackError, exact_sums, lattice_indices, lattice_value, pack_atoms,
                                     pack_pairs, packed_size, unpack_atoms, unpack_pairs)


def exact_cumulative_sums(values, counts, step):
    """Σ count · value over the decimals the values stand for, each prefix rounded once (Fraction)."""
    q = Fraction(1, round(1 / step)) if step < 1 else Fraction(step)
    out, total = [], Fraction(0)
    for v, c in zip(values, counts):
        total += int(c) * round(Fraction(v) / q) * q
        out.append(float(total))
    return out


@pytest.mark.parametrize("step, values", [
    (0.01, [0.01, 12.78, 13.62, 20.97, 99999.99]),
    (1.0, [-4983.0, -1.0, 0.0, 17.0, 4983.0]),
    (60.0, [1.7e9 - 1.7e9 % 60, 1.7e9 - 1.7e9 % 60 + 60]),
    (0.001, [-0.001, 0.0, 0.5, 1e6 + 0.001]),
])
def test_round_trip_and_exact_sums(rng, step, values):
    counts = rng.integers(0, 50000, len(values)).astype(float)
    cum = np.cumsum(counts).tolist()
    pack = pack_atoms(values, cum, step)
    assert pack is not None and len(pack) == packed_size(lattice_indices(values, step), counts)
    got_values, got_counts, got_sums = unpack_atoms(pack, step)
    assert got_values == [float(v) for v in values] and got_counts == cum
    assert got_sums == exact_cumulative_sums(values, counts, step) == exact_sums(values, cum, step)


def test_a_few_hundred_values_take_a_few_bytes_each(rng):
    # flights' distances: 214 whole miles, counts up to ~15,000: under 4 bytes a value, not 24
    values = np.unique(rng.integers(17, 4983, 214)).astype(float)
    counts = rng.integers(1, 15000, len(values)).astype(float)
    pack = pack_atoms(values, np.cumsum(counts), 1.0)
    assert len(pack) < 4 * len(values)


def test_what_does_not_pack():
    assert pack_atoms([0.30000000000000004], [5.0], 0.01) is None  # 1 ulp off its decimal
    assert pack_atoms([0.1], [5.0], 0.0) is None  # no lattice
    assert pack_atoms([1.0, 2.0], [5.0, 7.5], 1.0) is None  # a count that is not whole
    assert pack_atoms([1.0, 2.0], [5.0, 4.0], 1.0) is None  # a negative count
    assert pack_atoms([2.0, 1.0], [5.0, 7.0], 1.0) is None  # out of order
    assert pack_atoms([1.0, 1.0], [5.0, 7.0], 1.0) is None  # repeated
    assert pack_atoms([], [], 1.0) is None and pack_atoms([1.0], [1.0, 2.0], 1.0) is None
    assert pack_atoms([2.0**53], [1.0], 1.0) is None  # an index past 2^53
    assert pack_atoms([2.0**40], [2.0**14], 1.0) is None  # a sum past 2^53
    assert pack_atoms([float("nan")], [1.0], 1.0) is None and pack_atoms([1.0], [float("inf")], 1.0) is None
    assert exact_sums([0.1], [1.0], 0.0) is None


def test_zero_counts_pack(rng):
    # (a tracked table's deletes can leave a heavy value with no row)
    pack = pack_atoms([1.0, 2.0, 3.0], [4.0, 4.0, 9.0], 1.0)
    assert unpack_atoms(pack, 1.0) == ([1.0, 2.0, 3.0], [4.0, 4.0, 9.0], [4.0, 4.0, 19.0])


def test_lattice_value_is_the_decimal():
    assert lattice_value(1278.0, 0.01) == 12.78 and lattice_value(-3.0, 60.0) == -180.0


GOOD = pack_atoms([1.0, 5.0, 9.0], [3.0, 4.0, 10.0], 1.0)


@pytest.mark.parametrize("bad", [
    b"", b"\x01", GOOD[:-1], GOOD + b"\x00", b"\x02" + GOOD[1:],
    bytes([1, 2, 2, 3, 0, 1]),  # a zero step between values
    bytes([1, 1]) + b"\xff" * 10 + b"\x01\x01",  # a varint past 64 bits
    bytes([1, 100, 2, 3, 1, 1]),  # more values than bytes
    bytes([1, 1]) + b"\x80\x80\x80\x80\x80\x80\x80\x80\x02" + b"\x01",  # an index past 2^53
    bytes([1, 2, 2, 1]) + b"\x80\x80\x80\x80\x80\x80\x80\x10" + b"\x01",  # a step past 2^53
    bytes([1, 1, 2]) + b"\x80\x80\x80\x80\x80\x80\x80\x10",  # a count past 2^53
])
def test_malformed_packs_are_errors(bad):
    with pytest.raises(PackError):
        unpack_atoms(bad, 1.0)


def test_a_pack_needs_a_lattice():
    with pytest.raises(PackError):
        unpack_atoms(GOOD, 0.0)


def test_random_round_trips(rng):
    for _ in range(200):
        step = float(rng.choice([1.0, 0.01, 0.1, 5.0, 1e-6]))
        k = np.unique(rng.integers(-10**6, 10**6, rng.integers(1, 60)))
        values = [lattice_value(float(i), step) for i in k]
        cum = np.cumsum(rng.integers(0, 1000, len(k))).astype(float).tolist()
        pack = pack_atoms(values, cum, step)
        assert pack is not None
        got = unpack_atoms(pack, step)
        assert got[0] == values and got[1] == cum
        assert all(abs(s) < PACK_LIMIT * step for s in got[2])


def test_a_range_sum_of_packed_values_is_rounded_once():
    """(K_j − K_i)·q, not a difference of two cumulative sums: −4.4e9 × 10,000 beside 0.01 and 0.03 (a
    difference of rounded sums near −4.4e13 gave 0.0078125 for 0.01). The hard bounds are the float8s either
    side, widened by half an ulp of the largest magnitude a row (0.27.0: the decimal sum need not be a float8,
    nor a float8 column's rows their decimals; until 0.26.0 this test took bounds at the rounded sum as exact)."""
    from fractions import Fraction

    from pg_kde.synopsis.query import range_1d

    values, cum = [-4400000000.0, 0.01, 0.03], [10000.0, 10001.0, 10002.0]
    s = {"step": 0.01, "atom_values": [], "atom_cum_count": [], "atom_cum_sum": [],
         "atom_pack": pack_atoms(values, cum, 0.01), "kde_rows": 0, "grid": [], "cell_cum_count": [],
         "cell_cum_sum": [], "density": [], "shape_var": 0.0, "period": 0.0, "profile": []}
    for lo, hi, total in [(0.01, 0.01, "0.01"), (0.0, 1.0, "0.04"), (0.02, 0.03, "0.03"),
                          (None, 0.0, "-44000000000000"), (None, None, "-43999999999999.96")]:
        r = range_1d(s, lo, hi, 1)
        assert r.estimate == float(total) and r.low < Fraction(total) < r.high, (lo, hi, r)
        rows = {"0.01": 1, "0.04": 2, "0.03": 1}.get(total, 10002)
        assert r.high - r.low <= 2 * math.ulp(float(total)) + rows * math.ulp(max(abs(v) for v in values)) * 2, (lo, hi, r)


# ------------------------------------------------------------------------------------------- pairs (2-D)
PAIRS = ([0, 0, 3, 3, 200], [1, 5, 0, 9, 7], [5, 1, 300, 2, 1])


def test_pairs_round_trip_in_a_few_bytes_each(rng):
    assert unpack_pairs(pack_pairs(*PAIRS), 201, 10) == tuple(list(v) for v in PAIRS)
    cells = np.unique(np.column_stack([rng.integers(0, 170, 3000), rng.integers(0, 150, 3000)]), axis=0)
    counts = rng.integers(1, 200, len(cells))
    pack = pack_pairs(cells[:, 0].tolist(), cells[:, 1].tolist(), counts.tolist())
    assert unpack_pairs(pack, 170, 150) == (cells[:, 0].tolist(), cells[:, 1].tolist(), counts.tolist())
    assert len(pack) < 3.5 * len(cells)


@pytest.mark.parametrize("pairs", [
    ([0, 0], [1, 1], [1, 1]),  # a pair twice
    ([1, 0], [0, 0], [1, 1]),  # out of order
    ([0], [0], [0]),  # a count of 0
    ([-1], [0], [1]),
])
def test_what_does_not_pack_as_pairs(pairs):
    with pytest.raises(ValueError):
        pack_pairs(*pairs)


GOOD_PAIRS = pack_pairs(*PAIRS)


@pytest.mark.parametrize("bad, m1, m2", [
    (GOOD_PAIRS[:-1], 201, 10),  # cut short
    (GOOD_PAIRS + b"\x00", 201, 10),  # bytes past the pairs
    (bytes([1]) + GOOD_PAIRS[1:], 201, 10),  # another format
    (GOOD_PAIRS, 200, 10),  # a value off the first lattice
    (GOOD_PAIRS, 201, 9),  # ... off the second
    (bytes([2, 1, 0, 0, 0]), 1, 1),  # a count of 0
    (bytes([2, 5, 0, 0, 1]), 1, 1),  # more pairs than bytes
    (bytes([2, 1, 0, 0]) + b"\x80\x80\x80\x80\x80\x80\x80\x10", 1, 1),  # rows past 2^53
    (bytes([2, 1, 0, 0]) + b"\xff" * 10 + b"\x01", 1, 1),  # a varint past 64 bits
])
def test_malformed_pair_packs_are_errors(bad, m1, m2):
    with pytest.raises(PackError, match="pair_pack"):
        unpack_pairs(bad, m1, m2)


def test_an_exact_dot_past_float8s_range_is_infinite_of_its_sign():
    """exact_dot over finite products whose exact sum passes float8's range is ±∞ of the sum's sign (a red team
    on 0.27.0: copysign converted the Fraction and overflowed again, and a pair with 1,000 rows of 1e306 failed
    its refresh with "OverflowError: integer division result too large for a float"); the 2-D build of that
    pair completes."""
    import warnings

    from pg_kde.synopsis import ArrayTableReader, Requested
    from pg_kde.synopsis.build import build_2d, select_bandwidth
    from pg_kde.synopsis.packing import exact_dot

    assert exact_dot([1000, 1], [1e306, 1.0]) == math.inf
    assert exact_dot([1000, 1], [-1e306, 1.0]) == -math.inf
    assert exact_dot([2, 1], [2.0**1000, -(2.0**1001)]) == 0.0  # (finite products cancelling exactly)
    # products past float8's range whose sum is not (0.28.0: NaN, or ±∞, before)
    top = 1.7976931348623157e308
    assert exact_dot([3, 2, 5], [top, -top, 1.0]) == top
    assert exact_dot([100, 100, 3], [top, -top, -25.0]) == -75.0
    assert exact_dot([4, 2], [top, -top]) == math.inf and exact_dot([2, 4], [top, -top]) == -math.inf
    rng = np.random.default_rng(3)
    a = np.array([1.0] * 1000 + [1e306] * 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = build_2d(ArrayTableReader((a, rng.normal(0, 1, 2000))), Requested("auto", 5000, None, "auto", None),
                         select_bandwidth)
    assert len(built.grid_size) == 2 and min(built.grid_size) >= 2
