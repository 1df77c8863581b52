"""Tied data (rounded columns, duplicated rows): LSCV falls without bound as H becomes singular, and every
selector that collapses there must say so: at_boundary True and an LSCVBoundaryWarning that gives the
number of duplicated rows and what to use instead (docs/math.md §4 and §5). Continuous data must not be
flagged (pytest's filterwarnings = error turns any warning there into a failure)."""

import math
import re

import numpy as np
import pytest

from pg_kde import bandwidth
from pg_kde.bandwidth.lscv_matrix import _chol_of_factor, _collapse_steps
from pg_kde.bandwidth.result import _ties, _warn_boundary

SELECTORS = [bandwidth.lscv_h, bandwidth.lscv_H]


def correlated_normal(d: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    corr = 0.5 * np.ones((d, d)) + 0.5 * np.eye(d)
    return rng.multivariate_normal(np.zeros(d), corr, size=n)


def duplicated_rows(X: np.ndarray) -> int:
    return X.shape[0] - np.unique(X, axis=0).shape[0]


# Columns with a standard deviation of `sd` rounded to integers: coarse enough that many rows repeat.
LATTICE_SD = {1: 3.0, 2: 3.0, 3: 2.0, 5: 1.0}


def lattice(d: int, seed: int, n: int = 400) -> np.ndarray:
    return np.round(LATTICE_SD[d] * correlated_normal(d, n, seed))


def assert_flagged_as_ties(selector, X, **options):
    ties = duplicated_rows(X)
    assert ties > 0
    with pytest.warns(bandwidth.LSCVBoundaryWarning) as caught:
        r = selector(X, backend="native", **options)
    assert r.at_boundary is True
    messages = [str(w.message) for w in caught if issubclass(w.category, bandwidth.LSCVBoundaryWarning)]
    assert len(messages) == 1, messages
    message = messages[0]
    assert f"{ties} duplicated row(s) of {X.shape[0]}" in message, message
    assert "lower end" in message, message
    alternative = "plugin or normal_reference" if X.shape[1] == 1 else "normal_reference"
    assert f"Use {alternative} instead" in message, message
    assert np.all(np.isfinite(r.H))
    return r


@pytest.mark.parametrize("selector", SELECTORS)
@pytest.mark.parametrize("d", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rounded_columns_are_flagged_in_every_dimension(selector, d, seed):
    X = lattice(d, seed)
    r = assert_flagged_as_ties(selector, X)
    if selector is bandwidth.lscv_h:
        assert r.h == pytest.approx(r.details["grid"][0])  # the lower end of the grid


@pytest.mark.parametrize("selector", SELECTORS)
def test_rounded_columns_are_flagged_in_float32(selector):
    assert_flagged_as_ties(selector, lattice(2, 7), dtype="float32")


def one_coarse_column_sample(seed: int) -> np.ndarray:
    """Three weakly correlated columns, each with its own scale in [1, 12], rounded to integers (n = 2000):
    the samples on which lscv_H collapsed H along one direction and ended with log|H| far above the
    determinant guard, so that only a RuntimeWarning about the polish came out."""
    rng = np.random.default_rng(1000 + seed)
    rho = rng.uniform(0.0, 0.95)
    sds = np.exp(rng.uniform(0.0, math.log(12.0), 3))
    corr = rho * np.ones((3, 3)) + (1.0 - rho) * np.eye(3)
    return np.round(rng.multivariate_normal(np.zeros(3), corr, size=2000) * sds)


@pytest.mark.parametrize("seed", [7, 46])
def test_lscv_H_collapse_far_from_the_determinant_guard_is_flagged(seed):
    # Regression: smallest eigenvalue of H ~1e-8 (7.5e-9 for seed 7), at_boundary False before the collapse
    # check; the criterion still fell when H shrank.
    X = one_coarse_column_sample(seed)
    r = assert_flagged_as_ties(bandwidth.lscv_H, X)
    assert np.linalg.eigvalsh(r.H)[0] < 1e-6 * np.linalg.eigvalsh(np.cov(X, rowvar=False))[0]
    assert min(r.details["collapse_values"]) < r.objective


@pytest.mark.parametrize("selector", SELECTORS)
@pytest.mark.parametrize("d", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_continuous_data_are_not_flagged(selector, d, seed):
    X = correlated_normal(d, 400, seed)
    r = selector(X, backend="native")  # filterwarnings = error: any warning fails the test
    assert r.at_boundary is False
    if selector is bandwidth.lscv_H:
        assert r.details["polish"]["converged"] and r.details["collapse_values"] == []


@pytest.mark.parametrize("seed", [0, 1])
def test_continuous_data_are_not_flagged_at_n_2000(seed):
    # The size of the tied regression samples, with the same kind of columns left unrounded.
    X = one_coarse_column_sample(seed) + np.random.default_rng(seed).uniform(-0.5, 0.5, size=(2000, 3))
    assert duplicated_rows(X) == 0
    assert bandwidth.lscv_H(X, backend="native").at_boundary is False


def test_collapse_steps_shrink_by_a_decade():
    rng = np.random.default_rng(3)
    for smallest in (1e-1, 1e-6, 1e-12):  # down to a nearly singular H (condition 1e12)
        q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
        eigenvalues = np.array([smallest, 0.3, 1.0, 2.0])
        H = (q * eigenvalues) @ q.T
        chol = _chol_of_factor((q * np.sqrt(eigenvalues)) @ q.T)  # LLᵀ = H, without a Cholesky of H
        assert np.all(np.diag(chol) > 0)
        np.testing.assert_allclose(chol @ chol.T, H, rtol=1e-12, atol=1e-15)
        uniform, along = _collapse_steps(chol)
        for factor in (uniform, along):
            assert np.allclose(factor, np.tril(factor)) and np.all(np.diag(factor) > 0)
        np.testing.assert_allclose(uniform @ uniform.T, H / 10, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(np.linalg.svd(along, compute_uv=False)[::-1] ** 2,
                                   [smallest / 10, 0.3, 1.0, 2.0], rtol=1e-8)
        # Only the smallest eigenpair moved: H minus the step is (9/10) λ_min v vᵀ.
        v = q[:, 0]
        np.testing.assert_allclose(H - along @ along.T, 0.9 * smallest * np.outer(v, v), atol=1e-14)


def test_message_without_duplicated_rows_names_no_ties():
    # The warning counts duplicated rows only when there are some.
    with pytest.warns(bandwidth.LSCVBoundaryWarning) as caught:
        _warn_boundary("lscv_H", "lower", np.arange(6.0).reshape(3, 2))
    message = str(caught[0].message)
    assert "duplicated" not in message
    assert re.search(r"keeps falling as H shrinks towards a singular matrix", message), message


@pytest.mark.parametrize("seed", range(4))
def test_ties_counts_repeated_rows_as_a_sort_of_the_rows_would(seed):
    """_ties answers from one column when that column has no ties (no row can repeat), else from the rows:
    the same count as n minus the distinct rows, on rows tied in the first column but not in every column,
    on repeated rows, on -0.0 beside 0.0, and on continuous data."""
    rng = np.random.default_rng(seed)
    cases = [
        correlated_normal(3, 300, seed),  # continuous: no ties
        np.column_stack([np.round(rng.normal(size=300)), rng.normal(size=300)]),  # first column tied only
        lattice(2, seed),  # repeated rows
        np.column_stack([rng.normal(size=300), np.round(rng.normal(size=300))]),  # tied in the second only
        np.array([[0.0, 1.0], [-0.0, 1.0], [1.0, 2.0]]),  # -0.0 and 0.0: equal values, one repeated row
    ]
    counts = [_ties(X) for X in cases]
    assert counts == [duplicated_rows(X) for X in cases]
    assert counts[0] == counts[1] == counts[3] == 0 and counts[2] > 0 and counts[4] == 1
