"""The fast backends' primitives against the float64 NumPy reference, in both precisions, on sizes that
hit every tiling edge (tails shorter than a vector, single tiles, many): the native module under every
instruction set, the CUDA kernels in the host emulator and, marked gpu, on a device (the fast_backend
fixture, tests/unit/conftest.py). Then what only the native module has."""

import math

import numpy as np
import pytest

import pg_kde
from pg_kde import _native
from pg_kde.backend import NativeBackend, ReferenceBackend, SequentialBackend

ISAS = _native.available_isas()
REF = ReferenceBackend()
# Relative error allowed on a sum: float64 pays only rounding; float32 pays its working precision.
TOL = {"float64": 1e-12, "float32": 2e-6}


def test_native_module_is_built_and_chosen_by_auto():
    assert pg_kde.backends()["native"] is None
    assert pg_kde.get_backend("auto").name in ("native", "cuda")
    assert ISAS[-1] == "generic"


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_exp_nonpos_accuracy(isa, dtype):
    eps = float(np.finfo(dtype).eps)
    x = -np.concatenate([np.linspace(0, 80, 20001), np.geomspace(1e-12, 1, 1001)]).astype(dtype)
    y = _native.exp_nonpos(x, isa)
    exact = np.exp(x.astype(np.float64))
    # The exponent x·log2(e) is rounded once, so the error grows with |x|.
    assert np.all(np.abs(y - exact) <= exact * eps * (4 + 2 * np.abs(x.astype(np.float64))))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_exp_nonpos_flushes_to_zero_below_the_normal_range(isa, dtype):
    limit = (-127 if dtype == "float32" else -1023) * math.log(2)
    x = np.array([limit - 1, limit * 2, -1e30, -np.inf], dtype=dtype)
    assert np.all(_native.exp_nonpos(x, isa) == 0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n", [2, 3, 15, 16, 17, 33, 250, 1030])
@pytest.mark.parametrize("order", [2, 4, 6])
def test_plugin_pair_sum(fast_backend, dtype, n, order, rng):
    x = rng.standard_normal(n)
    g = 0.35
    expected = REF.plugin_pair_sum(x, g, order)
    got = fast_backend.plugin_pair_sum(x, g, order, dtype)
    # K⁽ʳ⁾ changes sign, so the sum can cancel: compare with the sum of magnitudes.
    u2 = (x[:, None] - x[None, :]) ** 2 / g**2
    poly = {2: u2 - 1, 4: (u2 - 6) * u2 + 3, 6: ((u2 - 15) * u2 + 45) * u2 - 15}[order]
    magnitude = np.abs(poly) * np.exp(-u2 / 2)
    assert abs(got - expected) <= TOL[dtype] * (np.triu(magnitude, 1).sum() + 1e-300)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("order", [2, 4, 6])
def test_plugin_pair_sum_with_far_outliers(fast_backend, dtype, order, rng):
    # u = 1e7 makes u^6 = 1e42, past float32's range, and 1e60 makes it pass float64's (1e30, the most that
    # float32 holds, for float32): the terms of such pairs are 0, not infinity times 0 (NaN), so the sum is
    # the sum of the pairs among the other points.
    x = np.concatenate([rng.standard_normal(37), [1e7, -3e7, 1e30 if dtype == "float32" else 1e60]])
    g = 0.35
    expected = REF.plugin_pair_sum(x[:37], g, order)
    got = fast_backend.plugin_pair_sum(x, g, order, dtype)
    assert math.isfinite(got)
    u2 = (x[:37, None] - x[None, :37]) ** 2 / g**2
    poly = {2: u2 - 1, 4: (u2 - 6) * u2 + 3, 6: ((u2 - 15) * u2 + 45) * u2 - 15}[order]
    assert abs(got - expected) <= TOL[dtype] * np.triu(np.abs(poly) * np.exp(-u2 / 2), 1).sum()
    assert REF.plugin_pair_sum(x, g, order) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n, d", [(2, 1), (17, 1), (40, 3), (129, 2), (300, 16)])
@pytest.mark.parametrize("derivative", [False, True])
def test_lscv_pair_sums(fast_backend, dtype, n, d, derivative, rng):
    z = rng.standard_normal((n, d))
    scales = np.geomspace(0.05, 40.0, 9)
    w = 2.0 ** (1 + d / 2)
    A_ref, D_ref = REF.lscv_pair_sums(z, scales, w, derivative)
    A, D = fast_backend.lscv_pair_sums(z, scales, w, derivative, dtype)
    # Scale of the terms: sum of e + w e² (A) and of S e (1 + 2 w e) (D).
    s = np.sum((z[:, None, :] - z[None, :, :]) ** 2, axis=-1)[np.triu_indices(n, 1)]
    for m, sc in enumerate(scales):
        e = np.exp(-s * sc / 4)
        assert abs(A[m] - A_ref[m]) <= TOL[dtype] * np.sum(e + w * e * e)
        if derivative:
            assert abs(D[m] - D_ref[m]) <= TOL[dtype] * np.sum(s * e * (1 + 2 * w * e))
    if not derivative:
        assert D is None


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n, d", [(2, 1), (33, 2), (101, 5), (64, 16)])
def test_lscv_moments(fast_backend, dtype, n, d, rng):
    z = rng.standard_normal((n, d))
    w = 2.0 ** (1 + d / 2)
    A_ref, M_ref = REF.lscv_moments(z, w)
    A, M = fast_backend.lscv_moments(z, w, dtype)
    u = (z[:, None, :] - z[None, :, :])[np.triu_indices(n, 1)]
    e = np.exp(-0.25 * np.sum(u * u, axis=1))
    assert abs(A - A_ref) <= TOL[dtype] * np.sum(e + w * e * e)
    bound = np.einsum("p,pa,pb->ab", e * (1 + 2 * w * e), np.abs(u), np.abs(u))
    assert np.all(np.abs(M - M_ref) <= TOL[dtype] * bound + 1e-300)
    assert np.array_equal(M, M.T)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("m, n, d", [(1, 1, 1), (7, 3, 1), (40, 17, 2), (300, 70, 3), (5, 1000, 16)])
def test_kde_sums(fast_backend, dtype, m, n, d, rng):
    points = rng.standard_normal((m, d)) * 1.5
    sample = rng.standard_normal((n, d))
    expected = REF.kde_sums(points, sample)
    got = fast_backend.kde_sums(points, sample, dtype)
    assert got.shape == (m,)
    np.testing.assert_allclose(got, expected, rtol=TOL[dtype] * 4, atol=1e-300)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sequential_baseline_matches_reference(dtype, rng):
    x = rng.standard_normal(300)
    z = rng.standard_normal((120, 3))
    seq = SequentialBackend()
    tol = 1e-12 if dtype == "float64" else 1e-4
    assert seq.plugin_pair_sum(x, 0.4, 4, dtype) == pytest.approx(REF.plugin_pair_sum(x, 0.4, 4), rel=tol)
    A, D = seq.lscv_pair_sums(z, [0.5, 2.0], 5.0, True, dtype)
    A_ref, D_ref = REF.lscv_pair_sums(z, [0.5, 2.0], 5.0, True)
    np.testing.assert_allclose(A, A_ref, rtol=tol)
    np.testing.assert_allclose(D, D_ref, rtol=tol)
    a, M = seq.lscv_moments(z, 5.0, dtype)
    a_ref, M_ref = REF.lscv_moments(z, 5.0)
    assert a == pytest.approx(a_ref, rel=tol)
    np.testing.assert_allclose(M, M_ref, rtol=tol * 10, atol=tol * np.abs(M_ref).max())
    np.testing.assert_allclose(seq.kde_sums(z[:10], z, dtype), REF.kde_sums(z[:10], z), rtol=tol)


def test_results_do_not_depend_on_thread_count(rng):
    x = rng.standard_normal(3000)
    z = rng.standard_normal((700, 4))
    scales = np.array([0.3, 1.0, 3.0])
    runs = []
    for threads in (1, 2, 3, 7):
        be = NativeBackend(threads=threads)
        runs.append(
            (
                be.plugin_pair_sum(x, 0.3, 6, "float32"),
                tuple(be.lscv_pair_sums(z, scales, 8.0, True, "float32")[1]),
                be.lscv_moments(z, 8.0)[0],
                tuple(be.kde_sums(z[:50], z, "float64")),
            )
        )
    assert all(r == runs[0] for r in runs[1:])


def test_native_rejects_unknown_isa_and_dtype():
    with pytest.raises(ValueError, match="available"):
        _native.plugin_pair_sum(np.zeros(4), 1.0, 4, "sse9")
    with pytest.raises(TypeError, match="float32 or float64"):
        _native.plugin_pair_sum(np.zeros(4, dtype=np.int64), 1.0, 4)
    with pytest.raises(ValueError, match="order"):
        _native.plugin_pair_sum(np.zeros(4), 1.0, 5)
    with pytest.raises(ValueError, match="2, 4 or 6"):
        _native.plugin_pair_sum(np.zeros(4), 1.0, 3)
    with pytest.raises(ValueError, match="same number of columns"):
        _native.kde_sums(np.zeros((3, 2)), np.zeros((4, 3)))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("sequential", [False, True])
def test_native_row_ranges_add_up_to_the_whole_sum(isa, dtype, sequential, rng):
    n = 2600  # tiles of 336 rows (engine.cpp, block_size): cuts at tile edges, inside tiles, by the ends
    cuts = [0, 1, 17, 336, 1008, 1024, 2049, 2500, n - 1, n]
    ranges = list(zip(cuts, cuts[1:]))
    kw = {"isa": isa, "sequential": sequential}
    x = rng.standard_normal(n).astype(dtype)
    whole = _native.plugin_pair_sum(x, 0.4, 6, **kw)
    parts = [_native.plugin_pair_sum(x, 0.4, 6, **kw, row_begin=a, row_end=b) for a, b in ranges]
    # PLUGIN rows are summed one by one, so a cut changes only the order of the double additions; the LSCV
    # kernels also regroup the rows at a cut before summing their vector accumulators (float32: ~1e-7).
    assert math.fsum(parts) == pytest.approx(whole, rel=1e-12 if not sequential else 1e-10)
    z = rng.standard_normal((n, 3)).astype(dtype)
    scales = np.geomspace(0.1, 10.0, 4)
    A, D = _native.lscv_pair_sums(z, scales, 2.8, True, **kw)
    sliced = [_native.lscv_pair_sums(z, scales, 2.8, True, **kw, row_begin=a, row_end=b) for a, b in ranges]
    rel = TOL[dtype] if not sequential else 1e-10
    np.testing.assert_allclose(sum(s[0] for s in sliced), A, rtol=rel)
    np.testing.assert_allclose(sum(s[1] for s in sliced), D, rtol=rel)
    a, m = _native.lscv_moments(z, 2.8, **kw)
    sliced = [_native.lscv_moments(z, 2.8, **kw, row_begin=a_, row_end=b) for a_, b in ranges]
    assert sum(s[0] for s in sliced) == pytest.approx(a, rel=rel)
    np.testing.assert_allclose(sum(s[1] for s in sliced), m, rtol=rel, atol=rel * np.abs(m).max())
    # An empty range is 0; row_end None is n; a range past n is refused.
    assert _native.plugin_pair_sum(x, 0.4, 6, **kw, row_begin=5, row_end=5) == 0.0
    assert _native.plugin_pair_sum(x, 0.4, 6, **kw, row_begin=0, row_end=None) == whole
    with pytest.raises(ValueError, match="row range"):
        _native.plugin_pair_sum(x, 0.4, 6, **kw, row_begin=n + 1)
    with pytest.raises(ValueError, match="row range"):
        _native.lscv_moments(z, 2.8, **kw, row_begin=10, row_end=5)


@pytest.mark.parametrize("n, d", [(2, 1), (7, 3), (1024, 16), (300, 40)])
def test_native_centred_gram_lower_inverse_and_transform_rows_match_float64_references(n, d, rng):
    """The O(n d²) steps of pg_kde._linalg: the centred sums of products against a double loop over the rows
    (math.fsum); L⁻¹ against SciPy's triangular solve of the identity; rows M(x − c) against a loop of
    math.fsum dot products, for M = L⁻¹ and for a full matrix; and whitened rows against SciPy's triangular
    solve. Correlated columns far from the origin (the centring matters); (n,) is read as (n, 1)."""
    from scipy.linalg import cholesky, solve_triangular

    X = 1e3 + rng.standard_normal((n, d)) @ np.tril(rng.uniform(0.2, 1.0, (d, d)))
    mean = X.mean(axis=0)
    gram = _native.centred_gram(X, mean)
    exact = np.array([[math.fsum((X[:, a] - mean[a]) * (X[:, b] - mean[b])) for b in range(d)] for a in range(d)])
    np.testing.assert_allclose(gram, exact, rtol=1e-12, atol=1e-12 * np.abs(exact).max())
    assert np.array_equal(gram, gram.T)
    x = X[:, 0].copy()
    assert _native.centred_gram(x, mean[:1]).shape == (1, 1)
    assert _native.centred_gram(x, mean[:1])[0, 0] == pytest.approx(exact[0, 0], rel=1e-12)
    full = rng.standard_normal((d, d))
    rows = X[: min(n, 50)]
    z = _native.transform_rows(rows, mean, full)
    loop = np.array([[math.fsum(full[a] * (r - mean)) for a in range(d)] for r in rows])
    np.testing.assert_allclose(z, loop, rtol=0, atol=1e-13 * np.abs(full).max() * np.abs(rows - mean).max() * d)
    assert z.flags.c_contiguous and z.dtype == np.float64
    if n > d:
        chol = cholesky(gram / (n - 1), lower=True)
        inverse = _native.lower_inverse(chol)
        cond = np.linalg.cond(chol)
        expected_inverse = solve_triangular(chol, np.eye(d), lower=True)
        np.testing.assert_allclose(inverse, expected_inverse, rtol=0, atol=1e-15 * cond * np.abs(expected_inverse).max())
        assert np.array_equal(inverse, np.tril(inverse))
        expected = solve_triangular(chol, (X - mean).T, lower=True).T
        # (the rows are multiplied by L⁻¹: an error growing with L's condition)
        np.testing.assert_allclose(_native.transform_rows(X, mean, inverse), expected, rtol=0,
                                   atol=1e-15 * cond * np.abs(expected).max())


def test_native_linear_algebra_refuses_shapes_that_do_not_match():
    X = np.ones((5, 3))
    with pytest.raises(ValueError, match="one value per column"):
        _native.centred_gram(X, np.zeros(2))
    with pytest.raises(ValueError, match="d x d"):
        _native.transform_rows(X, np.zeros(3), np.eye(2))
    with pytest.raises(ValueError, match="one value per column"):
        _native.transform_rows(X, np.zeros(4), np.eye(3))
    with pytest.raises(ValueError, match="square"):
        _native.lower_inverse(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"shape \(n,\) or \(n, d\)"):
        _native.centred_gram(np.ones((2, 2, 2)), np.zeros(2))
    # other dtypes and layouts are converted (pybind11's forcecast), as NumPy would
    Y = np.arange(15, dtype=np.float32).reshape(5, 3).T ** 2
    np.testing.assert_array_equal(_native.centred_gram(Y, np.zeros(5)),
                                  _native.centred_gram(np.ascontiguousarray(Y, dtype=np.float64), np.zeros(5)))
