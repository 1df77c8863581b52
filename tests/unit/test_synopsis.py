"""The synopsis math (pg_kde.synopsis) against direct computations."""

import numpy as np
import pytest

from pg_kde import bandwidth
from pg_kde.synopsis import (
    Atoms,
    atom_candidates,
    cumulative_integrals,
    grid_points,
    linear_binning,
    scale_bandwidth,
    smooth_masses,
)


def test_linear_binning_keeps_count_and_mean(rng):
    x = rng.uniform(2, 5, 10000)
    w = linear_binning(x, 2.0, 5.0, 301)
    assert w.sum() == pytest.approx(len(x))
    assert np.dot(w, grid_points(2.0, 5.0, 301)) == pytest.approx(x.sum(), rel=1e-12)
    assert np.all(w >= 0)


def test_smoothing_preserves_mass_and_reflects_at_the_edges(rng):
    x = rng.exponential(1.0, 20000)
    lo, hi = 0.0, float(x.max())
    w = linear_binning(x, lo, hi, 1024)
    m = smooth_masses(w, lo, hi, 0.2)
    assert m.sum() == pytest.approx(w.sum(), rel=1e-9)
    # Without reflection a Gaussian at the hard edge 0 would lose about half the mass near it.
    assert m[:20].sum() == pytest.approx(w[:20].sum(), rel=0.1)
    assert np.array_equal(smooth_masses(w, lo, hi, 1e-9), w)


def test_cumulative_integrals_are_exact_for_a_linear_density():
    lo, hi, n = 0.0, 2.0, 401
    g = grid_points(lo, hi, n)
    delta = g[1] - g[0]
    masses = g * delta  # density f(x) = x on [0, 2]: ∫f = 2, ∫x f = 8/3, ∫x² f = 4
    C, S, Q = cumulative_integrals(masses, lo, hi, rows=2.0)
    np.testing.assert_allclose([C[-1], S[-1], Q[-1]], [2.0, 8 / 3, 4.0], rtol=1e-12)
    np.testing.assert_allclose(C, g**2 / 2, rtol=1e-12, atol=1e-15)


def test_atoms_and_candidates(rng):
    x = np.concatenate([np.full(500, 3.0), np.full(40, 7.0), rng.uniform(0, 10, 9460)])
    candidates = atom_candidates(x[rng.permutation(len(x))[:5000]])
    assert 3.0 in candidates
    atoms = Atoms.from_counts([7.0, 3.0, 1.5], [40, 500, 3], min_count=10)
    np.testing.assert_array_equal(atoms.values, [3.0, 7.0])
    count, total, squares = atoms.cumulative()
    assert count == [500, 540] and total == [1500, 1780] and squares == [4500, 6460]
    assert atoms.rows == 540


def test_bandwidth_rates():
    assert scale_bandwidth(1.0, 1000, 8000, "plugin_cdf") == pytest.approx(0.5)
    assert scale_bandwidth(1.0, 1000, 32000, "plugin") == pytest.approx(0.5)
    assert scale_bandwidth(1.0, 1000, 500, "plugin") == 1.0


def test_plugin_cdf_on_normal_data_is_near_the_amise_value():
    x = np.random.default_rng(21).standard_normal(20000)
    # For N(0, 1): R(f') = 1/(4√π), so h_F = (4/n)^{1/3}.
    assert bandwidth.plugin_cdf(x, backend="native").h == pytest.approx((4 / 20000) ** (1 / 3), rel=0.05)
