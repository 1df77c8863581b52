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
