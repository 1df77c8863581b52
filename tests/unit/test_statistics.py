"""Statistical sanity: the selectors estimate what they should on data with known answers."""

import numpy as np
import pytest

from pg_kde import bandwidth


def test_plugin_on_standard_normal_is_near_the_amise_bandwidth():
    x = np.random.default_rng(11).standard_normal(10_000)
    h = bandwidth.plugin(x, backend="native").h
    assert h == pytest.approx((4 / 3) ** 0.2 * 10_000 ** -0.2, rel=0.05)


def test_plugin_is_smaller_for_bimodal_data_than_the_normal_reference():
    rng = np.random.default_rng(12)
    x = np.concatenate([rng.normal(-3, 1, 2000), rng.normal(3, 1, 2000)])
    h_nr = np.sqrt(bandwidth.normal_reference(x).H[0, 0])
    assert bandwidth.plugin(x, backend="native").h < 0.6 * h_nr


@pytest.mark.parametrize("selector", [bandwidth.plugin, bandwidth.plugin_cdf])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_plugin_with_the_robust_scale_ignores_a_far_outlier(selector, dtype):
    # One 1e9 among log-normal cents: on the robust scale the outlier sits ~1e8 scales away, where float32's
    # K6 polynomial overflows. The selectors give the bandwidth of the other rows, as the reference does.
    x = np.round(np.random.default_rng(14).lognormal(3, 1, 4096), 2)
    x[0] = 1e9
    ref = selector(x, backend="reference", scale="minim").h
    assert np.isfinite(ref) and ref < 5
    # float32 pays its working precision in the cancelling Ψ sums (as without the outlier).
    rel = 1e-9 if dtype == "float64" else 1e-3
    assert selector(x, backend="native", dtype=dtype, scale="minim").h == pytest.approx(ref, rel=rel)


@pytest.mark.parametrize("selector", [bandwidth.plugin, bandwidth.plugin_cdf])
@pytest.mark.parametrize("far", [1e20, 1e300, 1.7e308])
def test_plugin_bandwidth_does_not_depend_on_how_far_the_outlier_is(selector, far):
    # Every kernel term between the outlier and the rest is 0 however far it is, and the robust scale ignores
    # it: the bandwidth is the same with the outlier at 1e10 or at 1e300. (Centred on the mean, values of
    # 1e20 / 4096 cancelled the other rows to one point: h was 12 times too small; 1e300 overflowed the
    # standard deviation's squares and float32.)
    x = np.random.default_rng(15).gamma(1.0, 3.0, 4096)
    near, away = x.copy(), x.copy()
    near[0], away[0] = 1e10, far
    ref = selector(near, backend="reference", scale="minim").h
    assert selector(away, backend="reference", scale="minim").h == pytest.approx(ref, rel=1e-9)
    assert selector(away, backend="native", dtype="float64", scale="minim").h == pytest.approx(ref, rel=1e-9)
    assert selector(away, backend="native", dtype="float32", scale="minim").h == pytest.approx(ref, rel=1e-3)


def test_plugin_accepts_values_spanning_float8():
    x = np.concatenate([np.random.default_rng(16).random(3000), [-1.7e308, 1.7e308]])
    h = bandwidth.plugin_cdf(x, backend="native", dtype="float32", scale="minim").h
    assert 0 < h < 0.1


@pytest.mark.parametrize("values", [
    lambda rng: rng.random(3000) * 1e-300,  # h² underflows
    lambda rng: rng.standard_normal(3000) * 1e-161,  # h² subnormal: two digits left
    lambda rng: rng.random(3000) * 1e307 + 1e308,  # h² overflows
])
def test_plugin_says_when_the_bandwidth_leaves_float8(values):
    with pytest.raises(ValueError, match="leaves float64's range; rescale"):
        bandwidth.plugin(values(np.random.default_rng(17)), backend="native")


@pytest.mark.parametrize("method", ["lscv_h", "lscv_H", "normal_reference"])
@pytest.mark.parametrize("values, message", [
    (lambda rng: np.concatenate([rng.gamma(1.0, 3.0, 500), [1e300]]), "magnitude 1e\\+300: its squares overflow"),
    (lambda rng: rng.random(500) * 1e-300, "spreads over only .* underflow"),
    (lambda rng: np.concatenate([rng.random(500), [-1.7e308, 1.7e308]]), "magnitude 1.7e\\+308"),
])
def test_covariance_based_selectors_say_when_squares_leave_float8(method, values, message):
    with pytest.raises(ValueError, match=message):
        bandwidth.select(values(np.random.default_rng(18)), method=method, backend="native")


@pytest.mark.parametrize("rho", [0.8, -0.6])
def test_lscv_H_recovers_the_sign_of_the_correlation(rho):
    rng = np.random.default_rng(13)
    X = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=800)
    r = bandwidth.lscv_H(X, backend="native")
    assert np.all(np.linalg.eigvalsh(r.H) > 0)
    assert np.sign(r.H[0, 1]) == np.sign(rho)
    corr = r.H[0, 1] / np.sqrt(r.H[0, 0] * r.H[1, 1])
    assert abs(corr - rho) < 0.3
    assert r.at_boundary is False and r.h is None


def test_lscv_h_on_normal_data_is_near_the_normal_reference():
    X = np.random.default_rng(14).standard_normal((2000, 2))
    r = bandwidth.lscv_h(X, backend="native")
    h0 = (4 / (4 * 2000)) ** (1 / 6)
    assert 0.6 * h0 < r.h < 1.5 * h0
