"""The selectors' formulas against brute-force double loops written straight from the definitions
(Wand & Jones 1995; docs/math.md), on small n, with SciPy's densities rather than our reformulations."""

import math

import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm

from pg_kde import bandwidth, kde


def brute_lscv(X, H):
    """Eq. (32) by a double loop: 2n⁻² Σ_{i<j} [N(v; 0, 2H) − 2 N(v; 0, H)] + n⁻¹ N(0; 0, 2H)."""
    X = np.asarray(X, dtype=float).reshape(len(X), -1)
    n, d = X.shape
    H = np.atleast_2d(H)
    k2h = multivariate_normal(np.zeros(d), 2 * H)
    kh = multivariate_normal(np.zeros(d), H)
    total = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            v = X[i] - X[j]
            total += k2h.pdf(v) - 2 * kh.pdf(v)
    return 2 * total / n**2 + k2h.pdf(np.zeros(d)) / n


def brute_psi(x, g, r):
    """Ψ̂_r(g) = n⁻² Σᵢ Σⱼ g^{−r−1} K⁽ʳ⁾((xᵢ − xⱼ)/g), K⁽ʳ⁾(u) = He_r(u) φ(u), both sums over all i, j."""
    he = {4: lambda u: u**4 - 6 * u**2 + 3, 6: lambda u: u**6 - 15 * u**4 + 45 * u**2 - 15}[r]
    n = len(x)
    total = 0.0
    for i in range(n):
        for j in range(n):
            u = (x[i] - x[j]) / g
            total += he(u) * norm.pdf(u)
    return total / (n**2 * g ** (r + 1))


@pytest.mark.parametrize("backend", ["reference", "native", "sequential"])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_lscv_H_objective_matches_double_loop(backend, d, rng):
    X = rng.standard_normal((37, d)) @ (np.eye(d) + 0.3)
    A = rng.standard_normal((d, d)) * 0.2
    H = A @ A.T + 0.3 * np.eye(d)
    assert bandwidth.lscv_H_objective(X, H, backend=backend) == pytest.approx(brute_lscv(X, H), rel=1e-12)


@pytest.mark.parametrize("backend", ["reference", "native"])
def test_lscv_h_objective_is_lscv_H_at_h2_sigma(backend, rng):
    X = rng.standard_normal((41, 3)) @ np.array([[1.0, 0.4, 0.0], [0.0, 1.0, 0.2], [0.0, 0.0, 0.5]])
    sigma = np.cov(X, rowvar=False)
    hs = np.array([0.2, 0.5, 1.1])
    values = bandwidth.lscv_h_objective(X, hs, backend=backend)
    assert values.shape == (3,)
    for h, v in zip(hs, values):
        assert v == pytest.approx(brute_lscv(X, h * h * sigma), rel=1e-12)
    assert isinstance(bandwidth.lscv_h_objective(X, 0.5, backend=backend), float)


@pytest.mark.parametrize("scale", ["sd", "minim"])
def test_plugin_functionals_match_double_loop(scale, rng):
    x = rng.gamma(3.0, size=60)
    r = bandwidth.plugin(x, backend="reference", scale=scale)
    g1, g2 = r.details["g1"], r.details["g2"]
    sigma = r.details["sigma"]
    assert r.details["scale"] == scale
    # The selector works on x / σ̂; Ψ_r scales as σ̂^{−(r+1)}.
    assert r.details["psi6"] == pytest.approx(brute_psi(x, g1, 6) * sigma**7, rel=1e-10)
    assert r.details["psi4"] == pytest.approx(brute_psi(x, g2, 4) * sigma**5, rel=1e-10)
    # Stage formulas (Wand & Jones §3.6.1), in data units.
    s = np.std(x, ddof=1)
    iqr = np.subtract(*np.percentile(x, [75, 25]))
    # The paper's eq. (12)-(13): the sample standard deviation (n - 1); "minim" is KernSmooth's and ks's.
    assert sigma == pytest.approx(s if scale == "sd" else min(s, iqr / 1.349))
    psi8 = 105 / (32 * math.sqrt(math.pi) * sigma**9)
    assert g1 == pytest.approx((30 / (math.sqrt(2 * math.pi) * psi8 * len(x))) ** (1 / 9), rel=1e-12)
    psi6 = brute_psi(x, g1, 6)
    assert g2 == pytest.approx((6 / (math.sqrt(2 * math.pi) * -psi6 * len(x))) ** (1 / 7), rel=1e-10)
    psi4 = brute_psi(x, g2, 4)
    assert r.h == pytest.approx((1 / (2 * math.sqrt(math.pi) * psi4 * len(x))) ** 0.2, rel=1e-10)


def test_normal_reference_formula(rng):
    X = rng.standard_normal((250, 3)) @ np.array([[2.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.3, 0.0, 0.7]])
    r = bandwidth.normal_reference(X)
    n, d = X.shape
    expected = (4 / (d + 2)) ** (2 / (d + 4)) * n ** (-2 / (d + 4)) * np.cov(X, rowvar=False)
    np.testing.assert_allclose(r.H, expected, rtol=1e-12)
    x = X[:, 0]
    r1 = bandwidth.normal_reference(x)
    assert math.sqrt(r1.H[0, 0]) == pytest.approx((4 / 3) ** 0.2 * np.std(x, ddof=1) * n ** -0.2, rel=1e-12)


@pytest.mark.parametrize("backend", ["reference", "native", "sequential"])
def test_kde_evaluate_matches_double_loop(backend, rng):
    sample = rng.standard_normal((45, 2))
    points = rng.standard_normal((13, 2)) * 2
    H = np.array([[0.3, 0.1], [0.1, 0.2]])
    dens = multivariate_normal(np.zeros(2), H)
    expected = [np.mean([dens.pdf(p - x) for x in sample]) for p in points]
    np.testing.assert_allclose(kde.evaluate(points, sample, H, backend=backend), expected, rtol=1e-12)
    # A scalar bandwidth is H = h² I; 1-D data with a scalar is the usual bandwidth.
    np.testing.assert_allclose(
        kde.evaluate(points, sample, 0.5, backend=backend), kde.evaluate(points, sample, 0.25 * np.eye(2), backend=backend)
    )
    x = sample[:, 0]
    f = kde.evaluate([0.0, 1.0], x, 0.4, backend=backend)
    np.testing.assert_allclose(f, [np.mean(norm.pdf((t - x) / 0.4) / 0.4) for t in (0.0, 1.0)], rtol=1e-12)


def test_kde_integrates_to_one(rng):
    x = rng.standard_normal(200)
    r = bandwidth.plugin(x, backend="native")
    grid = np.linspace(-8, 8, 4001)
    assert np.trapezoid(kde.evaluate(grid, x, r), grid) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("backend", ["reference", "native"])
def test_lscv_h_result_is_a_stationary_point(backend, rng):
    X = rng.standard_normal((200, 2)) @ np.array([[1.0, 0.6], [0.0, 0.8]])
    r = bandwidth.lscv_h(X, backend=backend)
    assert not r.at_boundary
    assert r.objective == pytest.approx(bandwidth.lscv_h_objective(X, r.h, backend=backend), rel=1e-14)
    step = 1e-4 * r.h
    around = bandwidth.lscv_h_objective(X, np.array([r.h - step, r.h + step]), backend=backend)
    assert np.all(around >= r.objective)
    np.testing.assert_allclose(r.H, r.h**2 * np.cov(X, rowvar=False), rtol=1e-12)
    assert r.details["grid"][0] < r.h < r.details["grid"][-1]


def test_lscv_H_gradient_matches_finite_differences(rng):
    from pg_kde.backend import ReferenceBackend
    from pg_kde.bandwidth.lscv_matrix import _MatrixLSCV

    z = rng.standard_normal((80, 3))
    crit = _MatrixLSCV(z, ReferenceBackend(), "float64")
    L = np.array([[0.6, 0.0, 0.0], [0.1, 0.5, 0.0], [-0.2, 0.05, 0.7]])
    _, grad = crit.value_and_gradient_chol(L)
    for a, b in zip(*np.tril_indices(3)):
        e = np.zeros((3, 3))
        e[a, b] = 1e-6
        fd = (crit.value_chol(L + e) - crit.value_chol(L - e)) / 2e-6
        assert grad[a, b] == pytest.approx(fd, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("backend", ["reference", "native"])
def test_lscv_H_is_no_worse_than_lscv_h(backend, rng):
    X = rng.standard_normal((150, 2)) * np.array([1.0, 3.0])
    X[:, 1] += X[:, 0] ** 2
    rH = bandwidth.lscv_H(X, backend=backend)
    rh = bandwidth.lscv_h(X, backend=backend)
    assert rH.objective <= rh.objective + 1e-12 * abs(rh.objective)  # H = h²Σ̂ is one of its candidates
    assert rH.objective == pytest.approx(bandwidth.lscv_H_objective(X, rH.H, backend=backend), rel=1e-12)
    assert np.all(np.linalg.eigvalsh(rH.H) > 0)


def brute_psi2(x, g):
    n = len(x)
    u = (x[:, None] - x[None, :]) / g
    return float(np.sum((u**2 - 1) * norm.pdf(u))) / (n**2 * g**3)


def test_plugin_cdf_functional_matches_double_loop(rng):
    x = rng.gamma(3.0, size=80)
    r = bandwidth.plugin_cdf(x, backend="reference")
    sigma, g3 = r.details["sigma"], r.details["g3"]
    assert r.details["psi2"] == pytest.approx(brute_psi2(x, g3) * sigma**3, rel=1e-10)
    assert r.h == pytest.approx((1 / (math.sqrt(math.pi) * -brute_psi2(x, g3) * len(x))) ** (1 / 3), rel=1e-10)
