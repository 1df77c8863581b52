"""Bad input gets a ValueError (or TypeError) that names the problem; never a NaN or zero bandwidth."""

import math
import warnings

import numpy as np
import pytest

from pg_kde import _validate, bandwidth, kde

SELECTORS = [bandwidth.plugin, bandwidth.lscv_h, bandwidth.lscv_H, bandwidth.normal_reference]


@pytest.mark.parametrize("selector", SELECTORS)
@pytest.mark.parametrize(
    "bad, message",
    [
        ([1.0, np.nan, 3.0, 4.0], "1 NaN and 0 infinite"),
        ([1.0, 2.0, np.inf, -np.inf], "0 NaN and 2 infinite"),
        ([5.0], "at least 2"),
        ([], "at least 2"),
        ([3.0, 3.0, 3.0, 3.0], "constant"),
    ],
)
def test_bad_1d_data(selector, bad, message):
    with pytest.raises(ValueError, match=message):
        selector(np.array(bad), backend="native")


@pytest.mark.parametrize("selector", [bandwidth.lscv_h, bandwidth.lscv_H, bandwidth.normal_reference])
def test_collinear_and_constant_columns(selector, rng):
    x = rng.standard_normal(50)
    with pytest.raises(ValueError, match="collinear"):
        selector(np.column_stack([x, 2 * x + 1]))
    with pytest.raises(ValueError, match="column 1 of X is constant"):
        selector(np.column_stack([x, np.full(50, 7.0)]))


def test_plugin_rejects_multivariate_data(rng):
    with pytest.raises(ValueError, match="1-D selector"):
        bandwidth.plugin(rng.standard_normal((20, 2)))


def test_shapes_and_types(rng):
    with pytest.raises(ValueError, match="shape"):
        bandwidth.lscv_h(np.zeros((3, 3, 3)))
    with pytest.raises(TypeError, match="numeric"):
        bandwidth.plugin(["a", "b", "c"])
    with pytest.raises(TypeError, match="real-valued"):
        bandwidth.plugin(np.array([1 + 1j, 2.0, 3.0]))
    with pytest.raises(ValueError, match="grid"):
        bandwidth.lscv_h(rng.standard_normal(30), grid=2)


def test_backend_and_dtype_names(rng):
    x = rng.standard_normal(30)
    with pytest.raises(ValueError, match="valid backends: auto, reference, native, sequential, cuda"):
        bandwidth.plugin(x, backend="gpu")
    with pytest.raises(ValueError, match="dtype must be one of float64, float32"):
        bandwidth.plugin(x, dtype="float16")
    assert bandwidth.plugin(x, dtype=np.float32, backend="native").dtype == "float32"
    with pytest.raises(ValueError, match="valid methods"):
        bandwidth.select(x, method="silverman")


def test_bandwidth_arguments(rng):
    X = rng.standard_normal((40, 2))
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        bandwidth.lscv_H_objective(X, np.eye(3))
    with pytest.raises(ValueError, match="positive definite"):
        bandwidth.lscv_H_objective(X, np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="symmetric"):
        bandwidth.lscv_H_objective(X, np.array([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        bandwidth.lscv_H_objective(X, np.array([[np.nan, 0.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="positive and finite"):
        bandwidth.lscv_h_objective(X, [0.5, 0.0])
    with pytest.raises(ValueError, match="positive and finite"):
        kde.evaluate([0.0], [1.0, 2.0], -1.0)
    with pytest.raises(ValueError, match="1 column"):
        kde.evaluate(np.zeros((3, 1)), X, 1.0)
    with pytest.raises(ValueError, match="chosen for d = 1"):
        kde.evaluate(np.zeros((3, 2)), X, bandwidth.plugin(X[:, 0]))
    with pytest.raises(ValueError, match="NaN"):
        kde.evaluate([np.nan], [1.0, 2.0], 1.0)
    assert kde.evaluate(np.zeros((0, 2)), X, 1.0).shape == (0,)


def test_failed_call_leaves_input_untouched(rng):
    X = rng.standard_normal((30, 2))
    X[3, 1] = np.nan
    before = X.copy()
    with pytest.raises(ValueError):
        bandwidth.lscv_H(X)
    np.testing.assert_array_equal(X, before)


def test_plugin_with_zero_iqr_uses_the_standard_deviation():
    # Over three quarters of the rows on one value: IQR = 0, which must not give a zero bandwidth.
    x = np.concatenate([np.zeros(80), np.arange(1.0, 21.0)])
    assert np.subtract(*np.percentile(x, [75, 25])) == 0
    r = bandwidth.plugin(x, backend="native")
    assert r.details["sigma"] == pytest.approx(np.std(x, ddof=1))
    assert np.isfinite(r.h) and r.h > 0


@pytest.mark.parametrize("selector", [bandwidth.lscv_h, bandwidth.lscv_H])
def test_tied_data_flags_the_boundary_and_warns(selector, rng):
    X = rng.integers(0, 12, size=(400, 2)).astype(float)  # rounded data: many duplicated rows
    with pytest.warns(bandwidth.LSCVBoundaryWarning, match="duplicated row"):
        r = selector(X, backend="native")
    assert r.at_boundary is True
    assert np.all(np.linalg.eigvalsh(r.H) > 0) and np.all(np.isfinite(r.H))


def test_untied_data_does_not_warn(rng):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = bandwidth.lscv_h(rng.standard_normal(300), backend="native")
    assert r.at_boundary is False


@pytest.mark.parametrize("scale", [2.0**495, 2.0**-470])
def test_selectors_at_scales_whose_covariance_determinant_leaves_float64(scale, rng):
    """Column scales inside the documented limits (2^500, 2^-480) where |Σ̂| itself leaves float64's range in
    d = 3: the selectors are scale-equivariant (h unchanged, H times scale²), their objectives are the
    unit-scale ones times scale^-d (0 or inf only where that leaves the range), and evaluate's densities
    are no NaN. LSCV_h answered a boundary at 2^495 (its criterion underflowed to 0 on the whole grid) and
    raised OverflowError at 2^-470, as lscv_H and evaluate did."""
    X = rng.standard_normal((300, 3)) @ np.array([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.2, -0.3, 1.0]])

    def same_scaled(value, unit, rel):
        """value == unit · scale⁻³ in float64 (which overflows to ±inf or underflows to 0 here, as it must)."""
        with np.errstate(over="ignore", under="ignore"):
            expected = float(np.float64(unit) * np.float64(scale) ** -3)
        return value == expected if expected in (0.0, np.inf, -np.inf) else value == pytest.approx(expected, rel=rel)

    for selector in (bandwidth.lscv_h, bandwidth.lscv_H):
        unit, scaled = selector(X, backend="native"), selector(X * scale, backend="native")
        assert not scaled.at_boundary and not unit.at_boundary
        np.testing.assert_allclose(scaled.H / scale**2, unit.H, rtol=1e-6)
        assert same_scaled(scaled.objective, unit.objective, 1e-6)
    assert bandwidth.lscv_h(X * scale, backend="native").h == pytest.approx(bandwidth.lscv_h(X, backend="native").h, rel=1e-9)
    h = 0.7
    value = bandwidth.lscv_h_objective(X * scale, h, backend="native")
    assert same_scaled(value, bandwidth.lscv_h_objective(X, h, backend="native"), 1e-9)
    assert value in (0.0, -np.inf)  # (the criterion is negative near its minimum)
    H = h * h * np.cov(X * scale, rowvar=False)
    assert bandwidth.lscv_H_objective(X * scale, H, backend="native") == value
    # and at 2^±300 (|Σ̂|^(-1/2) about 2^∓900), where the objective stays inside float64
    small = 2.0**-300 if scale < 1 else 2.0**300
    with np.errstate(over="ignore", under="ignore"):
        expected = bandwidth.lscv_h_objective(X, h, backend="native") * float(np.float64(small) ** -3)
    assert np.isfinite(expected) and expected != 0
    assert bandwidth.lscv_h_objective(X * small, h, backend="native") == pytest.approx(expected, rel=1e-9)
    # densities: the unit-scale ones times scale^-3, here beyond float64 (inf near the sample) or 0
    f = kde.evaluate(X[:5] * scale, X * scale, bandwidth.normal_reference(X * scale).H)
    assert not np.isnan(f).any() and (f == (np.inf if scale < 1 else 0.0)).all()
    far = kde.evaluate(np.full((1, 3), 1e6) * scale, X * scale, np.eye(3) * scale**2 * 1e-3)
    assert far.tolist() == [0.0]


def test_times_exp_takes_the_product_in_logs_where_the_factor_alone_leaves_float64():
    from pg_kde._linalg import times_exp

    assert times_exp(3.0, 2.0) == 3.0 * math.exp(2.0) and isinstance(times_exp(3.0, 2.0), float)
    assert times_exp(1e-300, 800.0) == pytest.approx(math.exp(math.log(1e-300) + 800.0), rel=1e-12)
    assert times_exp(-1e300, -800.0) == pytest.approx(-math.exp(math.log(1e300) - 800.0), rel=1e-12)
    assert isinstance(times_exp(1e-300, 800.0), float)
    out = times_exp(np.array([0.0, 1e-300, -2.0, 1e-10, -0.0]), 800.0)
    assert out[0] == 0.0 and np.isfinite(out[1]) and out[2] == -np.inf and out[3] == np.inf and out[4] == 0.0
    assert times_exp(np.array([5.0, -5.0]), -800.0).tolist() == [0.0, -0.0]


@pytest.mark.parametrize("n", [1, 2, _validate._SPREAD_BLOCK_ROWS - 1, _validate._SPREAD_BLOCK_ROWS + 1,
                               3 * _validate._SPREAD_BLOCK_ROWS + 7])
def test_check_spread_finds_every_constant_column_a_block_of_rows_at_a_time(n, rng):
    """check_spread (compares a block of rows at a time, columns settled in earlier blocks left out) names the
    first column whose values all equal its first, as max == min says, whichever block its second value is in."""
    d = 7
    X = rng.standard_normal((n, d))
    X[:, 1] = 1e308
    X[:, 2] = -0.0
    X[0, 2] = 0.0  # −0 equals 0: constant
    X[:, 3] = 5.0
    X[-1, 3] = 5.000000000000001  # its only other value in the last block
    X[:, 4] = np.nan  # NaN equals nothing: never constant
    X[:, 5] = -1e308
    if n > 1:
        X[n // 2, 5] = 1e308
    X[:, 6] = 2.0
    for cols in [list(range(d)), [0, 3, 4, 5], [0, 4], [6, 0]]:
        Y = np.ascontiguousarray(X[:, cols])
        with np.errstate(invalid="ignore"):
            reference = np.flatnonzero(Y.max(axis=0) == Y.min(axis=0))
        if reference.size == 0:
            _validate.check_spread(Y)
        else:
            with pytest.raises(ValueError, match=f"column {reference[0]} of X is constant"):
                _validate.check_spread(Y)
