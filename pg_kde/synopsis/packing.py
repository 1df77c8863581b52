"""A column's exact frequency table on its value lattice, packed (the 1-D payload's ``atom_pack``); pairs of a
2-D synopsis (``pair_pack``); a lattice column's cells (:func:`pack_cells`, measured by benchmarks/coverage.py).

The heavy values of a 1-D synopsis are three float8 arrays: the values, their cumulative counts and their
cumulative sums, 24 bytes a value. Where every value lies on the column's lattice (step q > 0, each value
exactly the float8 :func:`lattice_value` gives its lattice index k), all three follow from the indices and
counts: value k·q (or k / (1/q)), cumulative count C, cumulative sum K·q for K the running sum of count ×
index, an exact integer. Packed as adaptive Rice codes, a value takes about 5–7 bits where its neighbours
are a step apart and hold a few rows each, up to 3 bytes where they are far apart and large: a Zipf-like
quantity's 900 values in 10⁶ rows take about 700 bytes, flights' distances (a few hundred whole miles) a few
hundred.

Layout since 0.31.0 (format 2; docs/math.md §7, "Packed heavy values"):
    byte 1        the format, 2
    varint        n, the number of values (>= 1; unsigned LEB128: 7 bits a byte, low first)
    varint        k₀ zigzag-coded (k ≥ 0 as 2k, k < 0 as −2k − 1)
    bits          high bit first: c₀; then n − 1 times k_i − k_{i−1} − 1 (>= 0) and c_i (>= 0), each an
                  adaptive Rice code (:class:`_Rice`; steps and counts each have a parameter of their own): a
                  quotient x >> k in unary (that many ones, a zero), the low k bits; from a quotient of
                  :data:`RICE_ESCAPE` on, that many ones, the value's bit length in 6 bits, its bits
    zero bits to the end of the last byte
Format 1 (up to 0.30.0; still read): n as above, then k₀ zigzag-coded, c₀, and n − 1 times k_i − k_{i−1} (>= 1)
and c_i, each a varint: 2–5 bytes a value. Indices, running counts and running sums K stay below 2^53 in
magnitude (exact in float8). The server decodes the same bytes (extension/atoms.c) into the same three
arrays; both reject anything else, and both write format 2.

Sums derived this way are the correctly rounded exact sums of the values (K·q, K / (1/q): one rounding),
not a float8 running sum.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from typing import Optional, Sequence, Tuple

#: The format bytes of a pack: varints (written up to 0.30.0, still read) and adaptive Rice codes (written
#: since 0.31.0).
PACK_VARINTS, PACK_RICE = 1, 2
PACK_FORMAT = 2
#: A Rice parameter's memory: its running sum and count halve when the count reaches this.
RICE_RESET = 8
#: A Rice code's quotient from which the value is written whole instead: this many ones, then its bit length in
#: six bits and its bits (a count of 10⁶ after counts of 1 takes 42 bits, not a million).
RICE_ESCAPE = 16
#: Largest magnitude of an index, a running count or a running index sum: exact in float8.
PACK_LIMIT = 2**53


def lattice_value(k: float, step: float) -> float:
    """The float8 value of lattice point k: k·q for steps of 1 and more, k / (1/q) below (the correctly
    rounded decimal, as numeric and float8 input give it)."""
    return k * step if step >= 1 else k / round(1 / step)


def _put(out: bytearray, x: int) -> None:
    while True:
        low = x & 0x7F
        x >>= 7
        if x:
            out.append(low | 0x80)
        else:
            out.append(low)
            return


def _zigzag(k: int) -> int:
    return 2 * k if k >= 0 else -2 * k - 1


def _unzigzag(d: int) -> int:
    """The k of :func:`_zigzag`'s d."""
    return d // 2 if d % 2 == 0 else -(d + 1) // 2


def _on_lattice(step: float) -> bool:
    """Whether ``step`` is a value lattice a pack can use: positive, and it and 1/step finite."""
    return step > 0 and math.isfinite(step) and math.isfinite(1 / step)


def lattice_indices(values: Sequence[float], step: float) -> Optional[list]:
    """The lattice indices of ``values`` when each is exactly its index's :func:`lattice_value` and within
    :data:`PACK_LIMIT`; None otherwise (a value 1 ulp off its decimal, a continuous column)."""
    if not _on_lattice(step):
        return None
    out = []
    for v in values:
        v = float(v)
        if not math.isfinite(v) or not math.isfinite(v / step):
            return None
        k = round(v / step)
        if abs(k) >= PACK_LIMIT or lattice_value(float(k), step) != v:
            return None
        out.append(int(k))
    return out


class _Rice:
    """One stream's adaptive Rice parameter, after LOCO-I's (Weinberger, Seroussi & Sapiro 2000): k =
    ⌊log₂(a / n)⌋ in whole numbers (0 where a < 2n), for a the sum of the stream's coded values and n their
    count plus one, both halved when n reaches :data:`RICE_RESET`, so that the parameter follows the values'
    local size. Encoder and decoder keep the same state: the parameter is never stored."""

    __slots__ = ("a", "n")

    def __init__(self):
        self.a, self.n = 0, 1

    def k(self) -> int:
        return max(0, (self.a // self.n).bit_length() - 1)

    def update(self, x: int) -> None:
        self.a += x
        self.n += 1
        if self.n == RICE_RESET:
            self.a >>= 1
            self.n >>= 1


class _Bits:
    """Bits written high first into whole bytes (the last one padded with zero bits)."""

    __slots__ = ("out", "acc", "used")

    def __init__(self, out: bytearray):
        self.out, self.acc, self.used = out, 0, 0

    def put(self, value: int, bits: int) -> None:
        self.acc = (self.acc << bits) | value
        self.used += bits
        while self.used >= 8:
            self.used -= 8
            self.out.append((self.acc >> self.used) & 0xFF)
        self.acc &= (1 << self.used) - 1

    def rice(self, x: int, state: _Rice) -> None:
        k = state.k()
        q = x >> k
        if q < RICE_ESCAPE:
            self.put(((1 << q) - 1) << 1, q + 1)  # q ones and a zero
            self.put(x & ((1 << k) - 1), k)
        else:  # RICE_ESCAPE ones, the bit length b in 6 bits, the b bits of x
            b = x.bit_length()
            self.put((1 << RICE_ESCAPE) - 1, RICE_ESCAPE)
            self.put(b, 6)
            self.put(x, b)
        state.update(x)

    def close(self) -> None:
        if self.used:
            self.put(0, 8 - self.used)


def rice_pack(ks: Sequence[int], counts: Sequence[int]) -> bytes:
    """The format-2 pack of sorted distinct lattice indices (within :data:`PACK_LIMIT`) and their counts
    (>= 0): the layout in the module's docstring."""
    out = bytearray([PACK_FORMAT])
    _put(out, len(ks))
    _put(out, _zigzag(int(ks[0])))
    bits, gaps, rows = _Bits(out), _Rice(), _Rice()
    prev = None
    for k, c in zip(ks, counts):
        if prev is not None:
            bits.rice(int(k) - prev - 1, gaps)
        bits.rice(int(c), rows)
        prev = int(k)
    bits.close()
    return bytes(out)


def pack_atoms(values: Sequence[float], cum_count: Sequence[float], step: float) -> Optional[bytes]:
    """The pack of sorted heavy values and their cumulative counts on lattice ``step``; None when they do not
    pack (no lattice, a value off it, counts that are not whole, sums past :data:`PACK_LIMIT`). Their
    cumulative sums are not read: the pack's are the exact ones (:func:`unpack_atoms`)."""
    if len(values) == 0 or len(values) != len(cum_count):
        return None
    ks = lattice_indices(values, step)
    if ks is None:
        return None
    counts = []
    before, running, prev = 0, 0, None
    for k, c_cum in zip(ks, cum_count):
        c_cum = float(c_cum)
        if not math.isfinite(c_cum) or c_cum != math.floor(c_cum):
            return None
        c = int(c_cum) - before
        before = int(c_cum)
        running += c * k
        if c < 0 or before >= PACK_LIMIT or abs(running) >= PACK_LIMIT or (prev is not None and k <= prev):
            return None
        counts.append(c)
        prev = k
    return rice_pack(ks, counts)


class PackError(ValueError):
    """A pack that is not one :func:`pack_atoms` makes."""


def _get(data: bytes, pos: int, column: str = "atom_pack") -> Tuple[int, int]:
    """The varint at ``pos`` and the position past it; PackError naming the payload ``column`` that holds the
    pack where the bytes end first, it passes 64 bits, or it is longer than its value needs (a last byte of 0
    after others: no encoder writes one)."""
    x, shift = 0, 0
    bad = f"pg_kde: the synopsis row's {column} is cut short or holds a varint past 64 bits or longer than its value"
    while True:
        if pos >= len(data) or shift > 63:
            raise PackError(bad)
        b = data[pos]
        pos += 1
        x |= (b & 0x7F) << shift
        if not b & 0x80:
            if x >= 2**64 or (b == 0 and shift > 0):
                raise PackError(bad)
            return x, pos
        shift += 7


def _varint_entries(data: bytes, pos: int, n: int):
    """Format 1's (index, count) pairs: a varint of the first index zigzag-coded, then of each step (>= 1)
    from the one before, each with a varint of its count."""
    k = 0
    for i in range(n):
        d, pos = _get(data, pos)
        if i == 0:
            if d >= 2 * PACK_LIMIT:
                raise PackError("pg_kde: the synopsis row's atom_pack holds values past 2^53")
            k = _unzigzag(d)
        elif d < 1:
            raise PackError("pg_kde: the synopsis row's atom_pack holds values out of order")
        elif d >= 2 * PACK_LIMIT:
            raise PackError("pg_kde: the synopsis row's atom_pack holds values past 2^53")
        else:
            k += d
        c, pos = _get(data, pos)
        yield k, c
    if pos != len(data):
        raise PackError("pg_kde: the synopsis row's atom_pack has bytes past its values")


def _rice_entries(data: bytes, pos: int, n: int):
    """Format 2's (index, count) pairs: the first index a zigzag varint, then a bit stream of adaptive Rice
    codes (:class:`_Rice`): each count, and before every count but the first, the step from the index before
    less one. A code is as the encoder writes it and no other way (an escape only for a quotient of
    :data:`RICE_ESCAPE` or more, a bit length that is the value's); the padding bits are zero."""
    d, pos = _get(data, pos)
    if d >= 2 * PACK_LIMIT:
        raise PackError("pg_kde: the synopsis row's atom_pack holds values past 2^53")
    k = _unzigzag(d)
    body = data[pos:]
    bits = format(int.from_bytes(body, "big"), f"0{8 * len(body)}b") if body else ""
    at = 0

    def short():
        return PackError("pg_kde: the synopsis row's atom_pack is cut short")

    def take(width: int) -> int:
        nonlocal at
        if at + width > len(bits):
            raise short()
        x = int(bits[at:at + width], 2) if width else 0
        at += width
        return x

    def rice(state: _Rice) -> int:
        nonlocal at
        r = state.k()
        zero = bits.find("0", at, at + RICE_ESCAPE)
        if zero >= 0:
            q = zero - at
            at = zero + 1
            x = (q << r) | take(r)
        else:
            if at + RICE_ESCAPE > len(bits):
                raise short()
            at += RICE_ESCAPE
            b = take(6)
            x = take(b)
            if b == 0 or x.bit_length() != b or (x >> r) < RICE_ESCAPE:
                raise PackError("pg_kde: the synopsis row's atom_pack holds a code the pack does not write")
        if x >= 2 * PACK_LIMIT:
            raise PackError("pg_kde: the synopsis row's atom_pack holds values past 2^53")
        state.update(x)
        return x

    gaps, rows = _Rice(), _Rice()
    for i in range(n):
        if i:
            k += rice(gaps) + 1
        yield k, rice(rows)
    if len(bits) - at >= 8 or bits.find("1", at) >= 0:
        raise PackError("pg_kde: the synopsis row's atom_pack has bytes past its values")


def unpack_atoms(pack: bytes, step: float, index_sums: bool = False) -> tuple:
    """(values, cumulative counts, cumulative sums) of a pack, as float8 lists; with ``index_sums``, also the
    running sums K of count × index as exact integers (a range's sum is then (K_j − K_i)·q, rounded once).
    Reads both formats. PackError when malformed."""
    data = bytes(pack)
    if len(data) < 4 or data[0] not in (PACK_VARINTS, PACK_RICE):
        raise PackError("pg_kde: the synopsis row's atom_pack is not a pack of format 1 or 2")
    if not _on_lattice(step):
        raise PackError("pg_kde: the synopsis row's atom_pack needs a value lattice (step > 0)")
    n, pos = _get(data, 1)
    if n < 1 or n > _most_values(data[0], len(data) - pos):
        raise PackError("pg_kde: the synopsis row's atom_pack holds a wrong number of values")
    values, counts, sums, ks = [], [], [], []
    total = running = 0
    entries = _varint_entries(data, pos, n) if data[0] == PACK_VARINTS else _rice_entries(data, pos, n)
    for k, c in entries:
        if c >= PACK_LIMIT:
            raise PackError("pg_kde: the synopsis row's atom_pack holds values past 2^53")
        total += c
        running += c * k
        if abs(k) >= PACK_LIMIT or total >= PACK_LIMIT or abs(running) >= PACK_LIMIT:
            raise PackError("pg_kde: the synopsis row's atom_pack holds values past 2^53")
        value = lattice_value(float(k), step)
        if values and not value > values[-1]:  # (a step so small that lattice values coincide)
            raise PackError("pg_kde: the synopsis row's atom_pack holds values out of order")
        values.append(value)
        counts.append(float(total))
        sums.append(lattice_value(float(running), step))
        ks.append(running)
    return (values, counts, sums, ks) if index_sums else (values, counts, sums)


def _most_values(form: int, left: int) -> int:
    """The most values a pack of format ``form`` can hold in the ``left`` bytes after its count: format 1 two
    bytes a value; format 2 at least a byte for the first index, then a bit for the first count and two for
    each value after it."""
    return 0 if left < 1 else left // 2 if form == PACK_VARINTS else (8 * (left - 1) + 1) // 2


def range_sum(ks: Sequence[int], upto: int, below: int, step: float) -> float:
    """The sum of the packed heavy values ``below`` … ``upto`` − 1 (positions in the sorted values) from their
    running index sums: (K − K')·q, one rounding (not a difference of two rounded cumulative sums, which
    cancels: −4.4e9 × 10,000 beside 0.01)."""
    k = (ks[upto - 1] if upto > 0 else 0) - (ks[below - 1] if below > 0 else 0)
    return lattice_value(float(k), step)


def exact_sums(values: Sequence[float], cum_count: Sequence[float], step: float) -> Optional[list]:
    """The cumulative sums a pack of these heavy values stores (exact, one rounding each); None when they do
    not pack."""
    pack = pack_atoms(values, cum_count, step)
    return None if pack is None else unpack_atoms(pack, step)[2]


#: The format byte of a pack of a 1-D synopsis' cells.
CELLS_FORMAT = 3


def _float8_bytes(values: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(values)}d", *(float(v) for v in values))


def pack_cells(grid: Sequence[float], cum_count: Sequence[float], cum_sum: Sequence[float],
               density: Sequence[float], step: float) -> Optional[bytes]:
    """The pack of a 1-D synopsis' cells on lattice ``step``, which gives back these very four arrays bit for
    bit (:func:`unpack_cells`); None where it would not: no lattice, fewer than two boundaries, a boundary that
    is not a half-step (k − ½)·q, running counts or sums that do not start at 0, a cell whose rows are not a
    whole number or whose sum is not the sum of whole steps of its own values (each row one of the lattice values
    k_i … k_{i+1} − 1 between its boundaries), anything past :data:`PACK_LIMIT`, a density that is not a float4.

    The catalog stores a boundary as three float8s and a float4, 28 bytes; packed, a cell takes a varint each
    for its width in steps, its rows and the sum of its rows' steps from its first value (0 ≤ O ≤ rows × (width
    − 1)), and its boundary's density 4 bytes: 7–16 bytes a boundary on benchmarks/coverage.py's columns
    (docs/benchmarks.md, "More cells at the same bytes"). The catalog does not store it yet.
    Layout, unsigned LEB128 varints as the heavy values' format 1 (the module's docstring):
        byte 1        the format, 3
        varint        n, the number of boundaries (>= 2)
        varint        k₀ zigzag-coded: the first boundary is (k₀ − ½)·q
        then n − 1 times: varint k_i − k_{i−1} (>= 1), varint the cell's rows c, varint its offset O
        then n float4s, little-endian: the densities
    The running counts are the cells' rows added up; the running sums add each cell's sum of steps
    Q = O + c·k_{i−1}, read as its value (Q·q, or Q / (1/q) below a step of 1), one float8 addition a cell, as a
    build sums them (:func:`pg_kde.synopsis.maths.cell_prefix`). A pack that would not give back the arrays it
    was made from is not made."""
    n = len(grid)
    if n < 2 or not (len(cum_count) == len(cum_sum) == len(density) == n) or not _on_lattice(step):
        return None
    try:
        ks = [round(float(g) / step + 0.5) for g in grid]
        counts = [float(c) for c in cum_count]
        if float(cum_count[0]) != 0.0 or float(cum_sum[0]) != 0.0 or any(c != math.floor(c) for c in counts):
            return None
        shares = struct.pack(f"<{n}f", *(float(d) for d in density))
    except (ValueError, OverflowError, struct.error):  # (a NaN or infinite boundary or count; a density past float4)
        return None
    if any(abs(k) >= PACK_LIMIT for k in ks) or any(b <= a for a, b in zip(ks, ks[1:])) or counts[-1] >= PACK_LIMIT:
        return None
    out = bytearray([CELLS_FORMAT])
    _put(out, n)
    _put(out, _zigzag(ks[0]))
    per = round(1 / step) if step < 1 else None
    for i in range(1, n):
        rows = int(counts[i]) - int(counts[i - 1])
        piece = float(cum_sum[i]) - float(cum_sum[i - 1])
        units = piece * per if per is not None else piece / step
        if rows < 0 or not math.isfinite(units):  # (a red team: a sum of 1e307 over a step of 0.01 raised here)
            return None
        q = round(units)
        offset = q - rows * ks[i - 1]
        if not 0 <= offset <= rows * (ks[i] - 1 - ks[i - 1]) or abs(q) >= PACK_LIMIT:
            return None
        _put(out, ks[i] - ks[i - 1])
        _put(out, rows)
        _put(out, offset)
    out += shares
    pack = bytes(out)
    back = unpack_cells(pack, step)
    if any(_float8_bytes(a) != _float8_bytes(b) for a, b in zip(back, (grid, cum_count, cum_sum, density))):
        return None  # (a density that float4 rounds, a sum that the additions round otherwise than these)
    return pack


def unpack_cells(pack: bytes, step: float) -> tuple:
    """(grid, cumulative counts, cumulative sums, densities) of a :func:`pack_cells` pack, as float lists.
    PackError naming ``cell_pack`` when malformed (cut short, bytes past its end, boundaries out of order, a
    cell's sum outside what its rows allow, anything past :data:`PACK_LIMIT`)."""
    data = bytes(pack)
    if len(data) < 1 or data[0] != CELLS_FORMAT:
        raise PackError("pg_kde: the synopsis row's cell_pack is not a pack of format 3")
    if not _on_lattice(step):
        raise PackError("pg_kde: the synopsis row's cell_pack needs a value lattice (step > 0)")
    n, pos = _get(data, 1, "cell_pack")
    if n < 2 or 3 * (n - 1) + 4 * n > len(data) - pos:
        raise PackError("pg_kde: the synopsis row's cell_pack holds a wrong number of boundaries")
    d, pos = _get(data, pos, "cell_pack")
    k = _unzigzag(d)
    if abs(k) >= PACK_LIMIT:
        raise PackError("pg_kde: the synopsis row's cell_pack holds values past 2^53")
    grid, counts, sums = [(k - 0.5) * step], [0.0], [0.0]
    total, running = 0, 0.0
    for _ in range(n - 1):
        width, pos = _get(data, pos, "cell_pack")
        rows, pos = _get(data, pos, "cell_pack")
        offset, pos = _get(data, pos, "cell_pack")
        if width < 1 or offset > rows * (width - 1):
            raise PackError("pg_kde: the synopsis row's cell_pack holds cells out of order or sums past their rows")
        q = offset + rows * k
        k += width
        total += rows
        if abs(k) >= PACK_LIMIT or total >= PACK_LIMIT or abs(q) >= PACK_LIMIT:
            raise PackError("pg_kde: the synopsis row's cell_pack holds values past 2^53")
        grid.append((k - 0.5) * step)
        if not grid[-1] > grid[-2]:  # (a step so small that half-steps coincide)
            raise PackError("pg_kde: the synopsis row's cell_pack holds cells out of order or sums past their rows")
        running += lattice_value(float(q), step)
        if not (math.isfinite(grid[-1]) and math.isfinite(running)):  # (a step so large: no pack_cells makes it)
            raise PackError("pg_kde: the synopsis row's cell_pack holds values past float8's range")
        counts.append(float(total))
        sums.append(running)
    if len(data) - pos != 4 * n:
        raise PackError("pg_kde: the synopsis row's cell_pack has bytes past its cells, or too few densities")
    density = list(struct.unpack(f"<{n}f", data[pos:]))
    return grid, counts, sums, density


def packed_size(indices: Sequence[int], counts: Sequence[float]) -> int:
    """Bytes of the pack of sorted lattice indices with these (estimated) counts."""
    if not len(indices):
        return 2
    return len(rice_pack(indices, [max(0, int(c)) for c in counts]))


# ---------------------------------------------------------------------------------------------- pairs (2-D)
#: The format byte of a pack of pairs.
PAIR_FORMAT = 2


def pack_pairs(i1: Sequence[int], i2: Sequence[int], counts: Sequence[int]) -> bytes:
    """The pack of a pair's exact frequency table (the 2-D payload's ``pair_pack``): entries (i₁, i₂, c), the
    positions of the two values in the axes' lattices (``lattice1``, ``lattice2``) and the rows holding that
    pair, sorted by i₁ then i₂, each count >= 1. Layout, unsigned LEB128 varints:
        byte 1        the format, 2
        varint        n, the number of entries (>= 1)
        then n times: varint i₁ − i₁' (the previous entry's; the first entry: i₁),
                      varint i₂ where i₁ moved on (and for the first entry), else i₂ − i₂' − 1,
                      varint c.
    A row of a few lattice values per axis takes 3-4 bytes."""
    out = bytearray([PAIR_FORMAT])
    _put(out, len(i1))
    prev = None
    for a, b, c in zip(i1, i2, counts):
        a, b, c = int(a), int(b), int(c)
        if a < 0 or b < 0 or c < 1 or (prev is not None and (a, b) <= prev):
            raise ValueError("pairs must be sorted, distinct and counted")
        if prev is None or a > prev[0]:
            _put(out, a if prev is None else a - prev[0])
            _put(out, b)
        else:
            _put(out, 0)
            _put(out, b - prev[1] - 1)
        _put(out, c)
        prev = (a, b)
    return bytes(out)


def unpack_pairs(pack: bytes, m1: int, m2: int) -> Tuple[list, list, list]:
    """(i₁, i₂, counts) of a pair pack (:func:`pack_pairs`) whose axes keep ``m1`` and ``m2`` lattice values;
    PackError when malformed (cut short, bytes past its entries, entries out of order or off the lattices,
    a count of 0, rows past 2^53). As _kde_pair_box reads it (extension/atoms.c)."""
    data = bytes(pack)
    if len(data) < 5 or data[0] != PAIR_FORMAT:
        raise PackError("pg_kde: the synopsis row's pair_pack is not a pack of format 2")
    n, pos = _get(data, 1, "pair_pack")
    if n < 1 or n > (len(data) - pos) // 3:
        raise PackError("pg_kde: the synopsis row's pair_pack holds a wrong number of pairs")
    out1, out2, counts = [], [], []
    a = b = total = 0
    for k in range(n):
        d, pos = _get(data, pos, "pair_pack")
        e, pos = _get(data, pos, "pair_pack")
        if k == 0 or d > 0:
            a, b = (d if k == 0 else a + d), e
        else:
            b = b + e + 1
        c, pos = _get(data, pos, "pair_pack")
        total += c
        if a >= m1 or b >= m2:
            raise PackError("pg_kde: the synopsis row's pair_pack holds a value off its axes' lattices")
        if c < 1 or total >= PACK_LIMIT:
            raise PackError("pg_kde: the synopsis row's pair_pack holds a count of 0 or rows past 2^53")
        out1.append(a)
        out2.append(b)
        counts.append(c)
    if pos != len(data):
        raise PackError("pg_kde: the synopsis row's pair_pack has bytes past its pairs")
    return out1, out2, counts


def exact_dot(counts: Sequence[int], values: Sequence[float]) -> float:
    """Σ c·v over whole counts and float8 values, exact and rounded once (no cancellation), also where a
    product c·v is past float8's range (0.28.0: ±∞, or NaN where they were of both signs, though 3 × 1.7976e308
    and -2 × 1.7976e308 sum to float8's largest); ±∞ where the sum is."""
    exact = sum((Fraction(int(c)) * Fraction(float(v)) for c, v in zip(counts, values)), Fraction(0))
    try:
        return float(exact)
    except OverflowError:  # (the sign from the Fraction itself: copysign would convert it, and overflow again)
        return math.inf if exact > 0 else -math.inf
