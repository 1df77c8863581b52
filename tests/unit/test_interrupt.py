"""The interrupt check: long sums run in slices with interrupt() between them (pg_kde._slices).

For every backend here (reference, native under each instruction set, sequential, and the CUDA kernels in
the host emulator): sliced sums equal unsliced ones, the check runs at least once per slice's worth of
work, and an exception it raises stops the work and reaches the caller unchanged, promptly. Then the
selectors, kde.evaluate and the synopsis smoothing steps, which pass the check down."""

import math
import threading
import time

import numpy as np
import pytest

from pg_kde.backend import reference as _reference
from pg_kde import _native, _slices, bandwidth, kde, synopsis
from pg_kde.backend import FallbackBackend, NativeBackend, ReferenceBackend, SequentialBackend
from pg_kde._errors import DeviceOutOfMemoryError

ISAS = _native.available_isas()
REF = ReferenceBackend()
# Sliced against unsliced, same backend: float64 differs only in the order partial sums are added; float32
# also in how the LSCV kernels group rows at a cut before summing a vector accumulator.
TOL = {"float64": 1e-12, "float32": 2e-6}
EMULATED_SMALL = {"block": 64, "pair_tile": 16, "buffer": 64}
SLICED_BACKENDS = (
    ["reference"]
    + [f"native-{isa}" for isa in ISAS]
    + ["sequential"]
    + [f"cuda-emulated-{reduction}" for reduction in ("partials", "block_atomic")]
)


class Stop(Exception):
    """What the tests' interrupt checks raise."""


class Counter:
    """An interrupt check that counts its calls and, from call ``raise_at`` on, raises ``error``."""

    def __init__(self, raise_at=None, error=None):
        self.calls = 0
        self.raise_at = raise_at
        self.error = error if error is not None else Stop("cancelled")

    def __call__(self):
        self.calls += 1
        if self.raise_at is not None and self.calls >= self.raise_at:
            raise self.error


@pytest.fixture
def sliced_backend(request, monkeypatch):
    """make(kind, budget): a backend of ``kind`` whose slices hold at most ``budget`` pair terms."""

    def make(kind, budget):
        if kind == "reference":
            monkeypatch.setattr(_reference, "_REFERENCE_BLOCK", int(budget))
            return ReferenceBackend()
        if kind.startswith("native-"):
            return NativeBackend(isa=kind[len("native-") :], slice_terms=budget)
        if kind == "sequential":
            return SequentialBackend(slice_terms=budget)
        reduction = kind[len("cuda-emulated-") :]
        return request.getfixturevalue("emulated_cuda")(reduction, slice_terms=budget, **EMULATED_SMALL)

    return make


def pairs(n):
    return n * (n - 1) // 2


# ------------------------------------------------------------------------------------------- slicing


@pytest.mark.parametrize("n", [1, 2, 3, 10, 1000, 4097])
@pytest.mark.parametrize("budget", [1, 7, 500, 10**5, 10**9])
def test_pair_slices_cover_every_row_once_within_the_budget(n, budget):
    slices = list(_slices.pair_slices(n, 1.0, budget))
    assert [a for a, _ in slices] == [0] + [b for _, b in slices[:-1]]
    assert slices[-1][1] == n and all(b > a for a, b in slices)

    def count(a, b):
        return pairs(n - a) - pairs(n - b)

    for a, b in slices:
        assert count(a, b) <= budget or b == a + 1  # one row is the smallest slice
        if b < n:
            assert count(a, b + 1) > budget  # and each slice is as large as the budget allows


def test_point_slices_and_recording():
    assert list(_slices.point_slices(10, 3.0, 7.0)) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert list(_slices.point_slices(3, 100.0, 1.0)) == [(0, 1), (1, 2), (2, 3)]
    check = _slices.recording(Counter(raise_at=2))
    assert _slices.recording(check) is check and _slices.recording(None) is None
    check()
    with pytest.raises(Stop) as caught:
        check()
    assert check.is_source_of(caught.value) and not check.is_source_of(Stop("another"))


# ------------------------------------------------------------------------ the primitives, per backend


def _primitives(rng):
    """(name, call(backend, dtype, interrupt), pair terms of the whole call), on inputs several emulated
    tiles wide. Each call's pair terms are a lower bound of its cost in pg_kde._slices.pair_terms."""
    x = rng.standard_normal(300)
    z = rng.standard_normal((150, 2))
    scales = np.geomspace(0.1, 10.0, 5)
    points, sample = rng.standard_normal((60, 2)), rng.standard_normal((200, 2))
    return [
        ("plugin", lambda be, dt, ck: be.plugin_pair_sum(x, 0.4, 6, dt, interrupt=ck), pairs(300)),
        ("lscv", lambda be, dt, ck: be.lscv_pair_sums(z, scales, 2.8, False, dt, interrupt=ck), 5 * pairs(150)),
        ("lscv_derivative", lambda be, dt, ck: be.lscv_pair_sums(z, scales, 2.8, True, dt, interrupt=ck),
         5 * pairs(150)),
        ("moments", lambda be, dt, ck: be.lscv_moments(z, 2.8, dt, interrupt=ck), 4 * pairs(150)),
        ("kde", lambda be, dt, ck: be.kde_sums(points, sample, dt, interrupt=ck), 60 * 200),
    ]


def _flat(result):
    parts = result if isinstance(result, tuple) else (result,)
    return np.concatenate([np.ravel(np.asarray(p, dtype=np.float64)) for p in parts if p is not None])


@pytest.mark.parametrize("kind, dtype", [(kind, dtype) for kind in SLICED_BACKENDS for dtype in ("float64", "float32")
                                          if (kind, dtype) != ("reference", "float32")])  # reference: float64 only
def test_sliced_primitives_equal_unsliced_and_check_once_per_slice(sliced_backend, kind, dtype, rng):
    budget = 4096
    for name, call, terms in _primitives(rng):
        be = sliced_backend(kind, budget)
        whole = _flat(call(be, dtype, None))
        check = Counter()
        sliced = _flat(call(be, dtype, check))
        assert check.calls >= max(3, math.ceil(terms / budget)), name  # several slices, one check each
        np.testing.assert_allclose(sliced, whole, rtol=TOL[dtype] if kind != "sequential" else 1e-10,
                                   atol=TOL[dtype] * np.abs(whole).max(), err_msg=name)
        # And the float64 reference, as the unsliced primitives are checked in test_kernels.py.
        expected = _flat(call(REF, "float64", None))
        np.testing.assert_allclose(sliced, expected, rtol=0, atol=10 * TOL[dtype] * np.abs(expected).max(),
                                   err_msg=name)


@pytest.mark.parametrize("kind", SLICED_BACKENDS)
def test_an_exception_from_the_check_stops_the_primitive_unchanged(sliced_backend, kind, rng):
    for name, call, _ in _primitives(rng):
        check = Counter(raise_at=3)
        with pytest.raises(Stop) as caught:
            call(sliced_backend(kind, 4096), "float64", check)
        assert caught.value is check.error and check.calls == 3, name  # nothing ran after it raised


def test_native_default_slices_split_a_large_sum(rng):
    be = NativeBackend()
    budget = be.slice_terms("float64")
    n = int(math.sqrt(2 * 4 * budget)) + 1  # about four slices of the default size, whatever the threads
    x = rng.standard_normal(n)
    check = Counter()
    sliced = be.plugin_pair_sum(x, 0.3, 4, "float64", interrupt=check)
    assert check.calls >= 4
    assert sliced == pytest.approx(be.plugin_pair_sum(x, 0.3, 4, "float64"), rel=1e-12)


def test_slice_budgets_scale_with_threads_and_precision():
    assert NativeBackend(threads=3).slice_terms("float32") == 3 * NativeBackend.SLICE_TERMS_PER_THREAD["float32"]
    assert NativeBackend(threads=1).slice_terms("float64") < NativeBackend(threads=1).slice_terms("float32")
    assert SequentialBackend().slice_terms("float32") == SequentialBackend.SLICE_TERMS_PER_THREAD["float32"]
    assert NativeBackend(slice_terms=123).slice_terms("float64") == 123


# ----------------------------------------------------------- cuda: batches, waits, and error translation


def test_cuda_batches_are_bounded_and_waited_for(emulated_cuda, rng):
    be = emulated_cuda("partials", slice_terms=2 * 64 * 64, **EMULATED_SMALL)
    x = rng.standard_normal(600)  # 10 tiles of 64 a side: 55 tile pairs, 2 per launch
    plain = be.plugin_pair_sum(x, 0.4, 4, "float64")
    launches = len(be.executor.launches)
    check = Counter()
    sliced = be.plugin_pair_sum(x, 0.4, 4, "float64", interrupt=check)
    batches = be.executor.launches[launches:]
    assert len(batches) == 28 == check.calls == be.executor.synchronizations
    assert all(grid[0] * grid[1] <= 2 for _, grid, _, _ in batches)
    assert sliced == pytest.approx(plain, rel=1e-12)


def test_cuda_does_not_translate_an_out_of_memory_message_from_the_check(emulated_cuda, rng):
    # The caller's exception is not the GPU's, even when its message says "out of memory" (PostgreSQL's own
    # "out of memory" error, raised by the check's plpy.execute, would): it is neither translated nor a
    # reason for backend="auto" to fall back.
    x = rng.standard_normal(300)
    error = RuntimeError("out of memory")
    check = Counter(raise_at=2, error=error)
    with pytest.raises(RuntimeError) as caught:
        emulated_cuda(slice_terms=4096, **EMULATED_SMALL).plugin_pair_sum(x, 0.4, 4, "float64", interrupt=check)
    assert caught.value is error


@pytest.mark.parametrize("error", [Stop("cancelled"), DeviceOutOfMemoryError("out of memory")])
def test_fallback_backend_does_not_fall_back_on_the_checks_exception(emulated_cuda, error, rng):
    fell_back = []

    def fallback():
        fell_back.append(1)
        return NativeBackend()

    be = FallbackBackend(emulated_cuda(slice_terms=4096, **EMULATED_SMALL), fallback)
    check = Counter(raise_at=2, error=error)
    with pytest.raises(type(error)) as caught:  # filterwarnings = error: a fallback warning would fail too
        be.lscv_pair_sums(rng.standard_normal((100, 2)), [0.5, 1.0], 2.8, True, "float64", interrupt=check)
    assert caught.value is error and fell_back == [] and be.name == "cuda"
    check = Counter()
    assert be.kde_sums(np.zeros((3, 1)), np.ones((5, 1)), "float64", interrupt=check).shape == (3,)
    assert check.calls >= 1


# ---------------------------------------------------------------------- selectors and kde.evaluate


@pytest.fixture
def small_native_slices(monkeypatch):
    """The native and sequential backends with slices of 2¹⁴ pair terms, so small data take many."""
    monkeypatch.setattr(NativeBackend, "SLICE_TERMS_PER_THREAD", {"float32": 1 << 13, "float64": 1 << 13})
    monkeypatch.setattr(SequentialBackend, "SLICE_TERMS_PER_THREAD", {"float32": 1 << 14, "float64": 1 << 14})


def _selector_calls(rng):
    x = rng.standard_normal(700)
    X = rng.multivariate_normal([0.0, 0.0], [[1.0, 0.6], [0.6, 1.0]], size=300)
    return [
        ("plugin", lambda **kw: bandwidth.plugin(x, **kw).H),
        ("plugin_cdf", lambda **kw: bandwidth.plugin_cdf(x, **kw).H),
        ("lscv_h", lambda **kw: bandwidth.lscv_h(X, **kw).H),
        ("lscv_H", lambda **kw: bandwidth.lscv_H(X, **kw).H),
        ("normal_reference", lambda **kw: bandwidth.normal_reference(X, **kw).H),
        ("select", lambda **kw: bandwidth.select(x, "auto", **kw).H),
        ("lscv_h_objective", lambda **kw: bandwidth.lscv_h_objective(X, [0.3, 0.5], **kw)),
        ("lscv_H_objective", lambda **kw: bandwidth.lscv_H_objective(X, [[0.2, 0.05], [0.05, 0.3]], **kw)),
        ("kde.evaluate", lambda **kw: kde.evaluate(X[:200], X, [[0.2, 0.05], [0.05, 0.3]], **kw)),
    ]


@pytest.mark.parametrize("backend", ["native", "sequential"])
def test_selectors_pass_the_check_down_and_give_the_same_answer(small_native_slices, backend, rng):
    for name, call in _selector_calls(rng):
        plain = call(backend=backend)
        check = Counter()
        checked = call(backend=backend, interrupt=check)
        assert check.calls >= (1 if name == "normal_reference" else 3), name
        # lscv_H's search compares criterion values that now differ in the last bits; it ends at the same
        # stationary point to well within its own tolerance.
        rtol = 1e-7 if name == "lscv_H" else 1e-10
        np.testing.assert_allclose(checked, plain, rtol=rtol, err_msg=name)


def test_selectors_stop_with_the_checks_exception(small_native_slices, rng):
    for name, call in _selector_calls(rng):
        for raise_at in (1, 4):
            check = Counter(raise_at=raise_at)
            if name == "normal_reference" and raise_at > 1:
                continue
            with pytest.raises(Stop) as caught:
                call(backend="native", interrupt=check)
            assert caught.value is check.error and check.calls == raise_at, name


def test_selectors_stop_under_auto_and_reference(small_native_slices, monkeypatch, rng):
    monkeypatch.setattr(_reference, "_REFERENCE_BLOCK", 1 << 12)
    x = rng.standard_normal(500)
    for backend in ("auto", "reference"):
        check = Counter(raise_at=5)
        with pytest.raises(Stop):
            bandwidth.plugin(x, backend=backend, interrupt=check)
        assert check.calls == 5


# ------------------------------------------------------------------------------------- promptness


class CancelAfter:
    """A check that starts raising once ``delay`` seconds have passed (set by a timer thread, as a cancel
    request arrives from outside); ``late`` is how long after the request the exception got out."""

    def __init__(self, delay):
        self.requested = None
        self.timer = threading.Timer(delay, self._request)

    def _request(self):
        self.requested = time.perf_counter()

    def __call__(self):
        if self.requested is not None:
            raise Stop("cancel requested")

    def run(self, work):
        self.timer.start()
        start = time.perf_counter()
        try:
            with pytest.raises(Stop):
                work(self)
        finally:
            self.timer.cancel()
        end = time.perf_counter()
        assert self.requested is not None
        return end - start, end - self.requested


def test_native_plugin_on_200000_rows_stops_promptly(rng):
    x = rng.standard_normal(200_000)  # ~2·10¹⁰ pairs per stage: seconds to tens of seconds in full
    total, late = CancelAfter(0.3).run(lambda check: bandwidth.plugin(x, backend="native", dtype="float32",
                                                                      interrupt=check))
    assert late < 0.5, f"the exception came {late:.3f} s after the cancel request"
    assert total < 1.5


def test_sequential_and_reference_stop_promptly(rng):
    x = rng.standard_normal(30_000)
    for backend in ("sequential", "reference"):
        _, late = CancelAfter(0.2).run(lambda check: bandwidth.plugin(x, backend=backend, interrupt=check))
        assert late < 0.5, f"{backend}: the exception came {late:.3f} s after the cancel request"


# ------------------------------------------------------------------------------ synopsis smoothing


def test_binned_kde_at_sliced_equals_unsliced(rng, monkeypatch):
    monkeypatch.setattr(synopsis.cells, "KDE_SLICE_TERMS", 1 << 10)  # read where binned_kde_at lives
    points = np.unique(np.concatenate([[-3.0, 5.0], rng.normal(1.0, 2.0, 3000).clip(-3, 5)]))
    rows = rng.integers(0, 50, len(points) - 1).astype(float)
    plain = synopsis.binned_kde_at(points, rows, 0.05)
    check = Counter()
    sliced = synopsis.binned_kde_at(points, rows, 0.05, interrupt=check)
    assert check.calls >= 8
    np.testing.assert_allclose(sliced, plain, rtol=1e-12)
    check = Counter(raise_at=2)
    with pytest.raises(Stop):
        synopsis.binned_kde_at(points, rows, 0.05, interrupt=check)
    assert check.calls == 2


@pytest.mark.parametrize("shape, H", [
    ((700, 500), [[0.8, 0.3], [0.3, 0.6]]),     # what a refresh uses: H capped at one cell
    ((300, 200), [[40.0, -10.0], [-10.0, 30.0]]),  # a wide kernel: bands overlap by 2·half rows
    ((400, 9), [[0.5, 0.0], [0.0, 1e-6]]),      # no smoothing along the second axis
])
def test_smooth_masses_2d_sliced_equals_unsliced(shape, H, monkeypatch, rng):
    monkeypatch.setattr(synopsis.maths, "FFT_SLICE_VALUES", 1 << 10)  # read where smooth_masses_2d lives
    weights = rng.poisson(3.0, shape).astype(np.float64)
    H = np.array(H)
    plain = synopsis.smooth_masses_2d(weights, (1.0, 1.0), H)
    check = Counter()
    sliced = synopsis.smooth_masses_2d(weights, (1.0, 1.0), H, interrupt=check)
    assert check.calls >= 3
    np.testing.assert_allclose(sliced, plain, rtol=1e-9, atol=1e-12 * plain.max())
    check = Counter(raise_at=2)
    with pytest.raises(Stop):
        synopsis.smooth_masses_2d(weights, (1.0, 1.0), H, interrupt=check)


def test_binned_kde_at_on_a_million_points_stops_promptly(rng):
    points = np.sort(rng.uniform(0.0, 1.0, 1_000_000))  # about 240 cells within reach of each: seconds in full
    rows = rng.integers(0, 100, len(points) - 1).astype(float)
    total, late = CancelAfter(0.3).run(lambda check: synopsis.binned_kde_at(points, rows, 1e-5, interrupt=check))
    assert late < 0.5, f"the exception came {late:.3f} s after the cancel request"
    assert total < 1.5