"""Packed heavy values, pairs and cells (pg_kde.synopsis.packing): lossless on a lattice, exact sums, refusals, and
malformed packs rejected. The server's decoder (extension/atoms.c) is checked against this one in tests/sql."""

from fractions import Fraction

import math
import numpy as np
import pytest

import struct

from pg_kde.synopsis import ArrayTableReader, Requested, build_1d, select_bandwidth
from pg_kde.synopsis.packing import (PACK_LIMIT, PackError, _put, exact_sums, lattice_indices, lattice_value, pack_atoms,
                                     pack_cells, pack_pairs, packed_size, unpack_atoms, unpack_cells, unpack_pairs)


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
    # steps whose values or reciprocal leave float8's range: none (the server's packer says NULL)
    assert pack_atoms([1e300], [1.0], 1e-10) is None and pack_atoms([1e308, 1.5e308], [1.0, 2.0], 1e-300) is None
    assert pack_atoms([0.0], [1.0], 5e-324) is None and pack_atoms([0.0], [1.0], 1e-310) is None


def test_zero_counts_pack(rng):
    # (a tracked table's deletes can leave a heavy value with no row)
    pack = pack_atoms([1.0, 2.0, 3.0], [4.0, 4.0, 9.0], 1.0)
    assert unpack_atoms(pack, 1.0) == ([1.0, 2.0, 3.0], [4.0, 4.0, 9.0], [4.0, 4.0, 19.0])


def test_lattice_value_is_the_decimal():
    assert lattice_value(1278.0, 0.01) == 12.78 and lattice_value(-3.0, 60.0) == -180.0


GOOD = pack_atoms([1.0, 5.0, 9.0], [3.0, 4.0, 10.0], 1.0)
#: The same heavy values in format 1 (varints, written up to 0.30.0): n, k₀ zigzag-coded, c₀, then step and count.
GOOD_VARINTS = bytes([1, 3, 2, 3, 4, 1, 4, 6])


def rice_pack_of(n: int, k0: int, bits: str) -> bytes:
    """A format-2 pack written by hand: its header (the reference's varints), then ``bits`` (high bit first)
    padded with zeros."""
    head = bytearray([2])
    _put(head, n)
    _put(head, 2 * k0 if k0 >= 0 else -2 * k0 - 1)
    body = bits + "0" * (-len(bits) % 8)
    return bytes(head) + (int(body, 2).to_bytes(len(body) // 8, "big") if body else b"")


def test_the_pack_is_format_2_and_format_1_still_reads():
    assert GOOD[0] == 2 and len(GOOD) == 6  # (3 values in 21 bits, 3 bytes, after a header of 3)
    assert unpack_atoms(GOOD, 1.0) == unpack_atoms(GOOD_VARINTS, 1.0) == (
        [1.0, 5.0, 9.0], [3.0, 4.0, 10.0], [3.0, 8.0, 62.0])
    # the codes as the layout says: c₀ = 3 at k = 0 (unary 111, a zero); the step 4 − 1 = 3 at k = 0 (1110),
    # c₁ = 1 at k = ⌊log₂(3 / 2)⌋ = 0 (10); the step 3 at k = ⌊log₂(3 / 2)⌋ = 0 (1110), c₂ = 6 at
    # k = ⌊log₂(4 / 3)⌋ = 0 (1111110)
    assert GOOD == rice_pack_of(3, 1, "1110" + "1110" + "10" + "1110" + "1111110")


def test_a_large_count_after_small_ones_is_written_whole():
    # (a Zipf-like column's first value holds most rows: a unary quotient of 10⁶ would take 10⁶ bits)
    pack = pack_atoms([1.0, 2.0, 3.0], [1.0, 2.0, 1_000_002.0], 1.0)
    assert len(pack) <= 10
    assert unpack_atoms(pack, 1.0)[1] == [1.0, 2.0, 1_000_002.0]
    assert unpack_atoms(pack_atoms([0.0], [2.0**53 - 1], 1.0), 1.0)[1] == [2.0**53 - 1]


def test_a_zipf_like_quantity_packs_in_about_six_bits_a_value():
    rng = np.random.default_rng(1)
    q = np.minimum(np.floor(1 / (1 - rng.random(10**6)) ** (1 / 1.2)), 100000)
    values, counts = np.unique(q, return_counts=True)
    pack = pack_atoms(values, np.cumsum(counts), 1.0)
    assert unpack_atoms(pack, 1.0)[:2] == (values.tolist(), np.cumsum(counts).astype(float).tolist())
    # 904 values: 741 bytes (format 1: 1,915)
    assert len(pack) < 0.85 * len(values)


@pytest.mark.parametrize("bad", [
    b"", b"\x01", GOOD[:-1], GOOD + b"\x00", b"\x03" + GOOD[1:], b"\x00" + GOOD[1:],
    GOOD_VARINTS[:-1], GOOD_VARINTS + b"\x00",
    rice_pack_of(3, 1, "1110" + "1110" + "10" + "1110" + "1111110" + "1"),  # a padding bit set
    rice_pack_of(1, 0, "1" * 16 + "000001" + "1"),  # an escape for a quotient of 1
    rice_pack_of(1, 0, "1" * 16 + "010100" + "0" * 19 + "1"),  # an escape whose bit length is not the value's
    rice_pack_of(1, 0, "1" * 16 + "110110" + "1" + "0" * 53),  # a count of 2^53
    rice_pack_of(2, 2**52 + 1, "0" + "1" * 16 + "110101" + "1" + "0" * 52 + "0"),  # an index past 2^53
    rice_pack_of(1, 0, "1" * 16 + "00"),  # an escape cut short
    rice_pack_of(100, 0, "0" * 8),  # more values than bits
    rice_pack_of(1, 0, "0" + "0" * 8),  # a byte past the codes
    bytes([2, 1]) + b"\x80" * 8 + b"\x02\x00",  # a first index past 2^53
    bytes.fromhex("02ffff7f"), bytes.fromhex("0280808040"), bytes.fromhex("02808080808080808020"),  # n, no more
    bytes.fromhex("0281000000"), bytes.fromhex("0201800000"),  # n or k₀ in a varint longer than it needs
    bytes.fromhex("01028000020101"),  # (format 1 too: a step of 0 written in two bytes)
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


def _leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _cells(step, ks, rows_values, density):
    """The four arrays of cells with boundaries (k − ½)·q and these rows' lattice indices in each, summed as a
    build sums them (each cell's sum of steps read as its value, added up one float8 addition a cell)."""
    grid = [(k - 0.5) * step for k in ks]
    counts = [0.0] + np.cumsum([len(r) for r in rows_values]).astype(float).tolist()
    sums, running = [0.0], 0.0
    for r in rows_values:
        running += lattice_value(float(sum(r)), step)
        sums.append(running)
    return grid, counts, sums, density


def test_cells_pack_as_their_layout_says_and_come_back_bit_for_bit():
    """pack_cells writes the layout of its docstring (written out here byte by byte: a negative first boundary, an
    empty cell, a wide sparse one, 200 rows on two values) and unpack_cells gives back the very arrays."""
    step = 0.01
    ks = [-20, -19, 101, 103, 50001]
    rows = [[-20] * 3, [50] * 150 + [100] * 50, [], [49999, 50000]]
    density = [0.5, 1.0, 2.0, 0.25, 0.125]
    grid, counts, sums, _ = _cells(step, ks, rows, density)
    want = bytearray([3]) + _leb128(5) + _leb128(39)  # (zigzag of −20)
    for i in range(1, 5):
        want += _leb128(ks[i] - ks[i - 1]) + _leb128(len(rows[i - 1])) + _leb128(sum(k - ks[i - 1] for k in rows[i - 1]))
    want += struct.pack("<5f", *density)
    pack = pack_cells(grid, counts, sums, density, step)
    assert pack == bytes(want) and len(pack) < 28 * 5
    back = unpack_cells(pack, step)
    assert [struct.pack("<d", x) for a in back[:3] for x in a] == [struct.pack("<d", x) for a in (grid, counts, sums)
                                                                     for x in a]
    assert back[3] == density and sums[2] == pytest.approx(-0.6 + 125.0)


@pytest.mark.parametrize("column, budget", [("cents", 8192), ("zipf", 2048), ("seconds", 8192)])
def test_a_builds_cells_pack_and_come_back(column, budget):
    """Built synopses of lattice columns (cents, Zipf-like integers beside their frequency table, whole seconds of
    2024) pack in far fewer bytes than their arrays' 28 a boundary, and unpack to the very arrays."""
    rng = np.random.default_rng(11)
    x = {"cents": np.round(np.exp(3 + rng.standard_normal(200_000)), 2),
         # (a heavier tail than budget.py's qty, P(X >= k) = k^-0.9: 2,505 values, whose table does not fit
         # 2 KB; budget.py's 952 do, since 0.31.0's packs)
         "zipf": np.minimum(np.floor(1 / np.power(1 - rng.random(1_000_000), 1 / 0.9)), 100000.0),
         "seconds": 1704067200.0 + np.floor(rng.random(200_000) * 366 * 86400)}[column]
    built = build_1d(ArrayTableReader((x,)), Requested("auto", 50000, None, "auto", budget),
                     lambda s, m, b, required=True, scale=None: select_bandwidth(s, m, b, required=required, scale=scale))
    p = built.payload()
    arrays = (p["grid"], p["cell_cum_count"], p["cell_cum_sum"], p["density"])
    assert len(p["grid"]) > 10
    pack = pack_cells(*arrays, p["step"])
    assert pack is not None and len(pack) < 16 * len(p["grid"])
    back = unpack_cells(pack, p["step"])
    for a, b in zip(back, arrays):
        assert np.asarray(a, dtype=np.float64).tobytes() == np.asarray(b, dtype=np.float64).tobytes()


def test_what_does_not_pack_as_cells():
    step = 1.0
    grid, counts, sums, density = _cells(step, [0, 2, 5], [[0, 1], [2, 4, 4]], [1.0, 2.0, 0.5])
    assert pack_cells(grid, counts, sums, density, step) is not None
    assert pack_cells(grid, counts, sums, density, 0.0) is None  # (no lattice)
    assert pack_cells(grid[:1], counts[:1], sums[:1], density[:1], step) is None  # (one boundary)
    assert pack_cells([-0.4] + grid[1:], counts, sums, density, step) is None  # (not a half-step)
    assert pack_cells(grid, [1.0] + counts[1:], sums, density, step) is None  # (counts not from 0)
    assert pack_cells(grid, [0.0, 2.5, 5.0], sums, density, step) is None  # (rows not whole)
    assert pack_cells(grid, counts, [0.0, 1.0, 20.0], density, step) is None  # (a sum below its rows' least: 2·2)
    assert pack_cells(grid, counts, [0.0, 1.0, 14.0], density, step) is None  # (above their most: 3·4)
    assert pack_cells(grid, counts, [0.0, 1.5, 11.5], density, step) is None  # (not whole steps)
    assert pack_cells(grid, counts, sums, [1.0, 0.1, 0.5], step) is None  # (0.1 is no float4)
    # (a density as the float4 array holds it comes back as it is, NaN too: the pack is the arrays, not a check)
    assert math.isnan(unpack_cells(pack_cells(grid, counts, sums, [1.0, math.nan, 0.5], step), step)[3][1])
    assert pack_cells([0.5, -0.5, 4.5], counts, sums, density, step) is None  # (out of order)
    assert pack_cells(grid, counts, sums, density[:2], step) is None
    big = [(k - 0.5) for k in (0, 2.0**53, 2.0**53 + 2)]
    assert pack_cells(big, counts, sums, density, step) is None
    # (found by a red team: sums or steps whose quanta pass float8's range raised OverflowError, not None)
    assert pack_cells([-5e-10, 5e-10], [0.0, 1.0], [0.0, 1e300], [0.5, 0.5], 1e-9) is None
    assert pack_cells([-0.005, 0.005], [0.0, 1.0], [0.0, 1e307], [0.5, 0.5], 0.01) is None
    assert pack_cells([-0.005, 0.005], [0.0, 1.0], [0.0, -1e307], [0.5, 0.5], 0.01) is None
    assert pack_cells([-2.5e-324, 2.5e-324], [0.0, 1.0], [0.0, 0.0], [0.5, 0.5], 5e-324) is None
    for sums in ([0.0, 0.0], [0.0, 1e-200], [0.0, 1e300]):  # (a pack that comes back, or None: never an error)
        pack = pack_cells([-5e-201, 5e-201], [0.0, 1.0], sums, [0.5, 0.5], 1e-200)
        assert pack is None or unpack_cells(pack, 1e-200) == ([-5e-201, 5e-201], [0.0, 1.0], sums, [0.5, 0.5])


@pytest.mark.parametrize("bad", [
    b"", b"\x01\x02", b"\x03", b"\x03\x01",  # (another format; cut short; one boundary)
    b"\x03\x02\x00\x00\x01\x00" + struct.pack("<2f", 1, 1),  # (a cell of no width)
    b"\x03\x02\x00\x02\x01\x02" + struct.pack("<2f", 1, 1),  # (a sum past its rows: 1 row, 1 step over 2 values is the most)
    b"\x03\x02\x00\x02\x01\x01" + struct.pack("<2f", 1, 1) + b"\x00",  # (a byte past its end)
    b"\x03\x02\x00\x02\x01\x01" + struct.pack("<1f", 1),  # (a density short)
    b"\x03\x02\x00\xff\xff\xff\xff\xff\xff\xff\xff\x01\x01\x00" + struct.pack("<2f", 1, 1),  # (past 2^53)
])
def test_malformed_cell_packs_are_errors(bad):
    with pytest.raises(PackError, match="cell_pack"):
        unpack_cells(bad, 1.0)
    # (a red team: a pack read with a step so large that its boundaries or sums pass float8's range)
    three = pack_cells([-0.5, 1.5, 3.5], [0.0, 1.0, 2.0], [0.0, 1.0, 3.0], [1.0, 1.0, 1.0], 1.0)
    with pytest.raises(PackError, match="float8's range"):
        unpack_cells(three, 1e308)
    assert unpack_cells(b"\x03\x02\x00\x02\x01\x01" + struct.pack("<2f", 1, 2), 1.0) == (
        [-0.5, 1.5], [0.0, 1.0], [0.0, 1.0], [1.0, 2.0])
    with pytest.raises(PackError, match="lattice"):
        unpack_cells(b"\x03\x02\x00\x02\x01\x01" + struct.pack("<2f", 1, 2), 0.0)
