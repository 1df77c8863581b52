"""The synopsis math (pg_kde.synopsis) against direct computations."""

import numpy as np
import pytest

from pg_kde import bandwidth
from pg_kde.synopsis import (
    Atoms,
    atom_candidates,
    binned_kde_at,
    cell_prefix,
    scale_bandwidth,
)


def test_linear_binning_keeps_count_and_mean(rng):
    x = rng.uniform(2, 5, 10000)
    grid = np.linspace(2.0, 5.0, 301)
    w = linear_binning_on(grid, x)
    assert w.sum() == pytest.approx(len(x))
    assert np.dot(w, grid) == pytest.approx(x.sum(), rel=1e-12)
    assert np.all(w >= 0)


def test_binned_kde_follows_the_data_and_reflects_at_the_edges(rng):
    x = rng.exponential(1.0, 200000)
    points = np.quantile(x, np.linspace(0, 1, 257))
    points[0], points[-1] = x.min(), x.max()
    rows = np.histogram(x, bins=points)[0]
    d = binned_kde_at(points, rows, 0.05)
    inner = (points > 0.2) & (points < 3)
    ratio = d[inner] / np.exp(-points[inner])
    assert ratio.mean() == pytest.approx(1.0, rel=0.02) and ratio.std() < 0.03  # the true density exp(-x)
    assert d[0] > 0.8 * d[3]  # reflection keeps the density up at the hard edge 0
    grid = np.linspace(x.min(), x.max(), 20001)
    fine = binned_kde_at(grid, np.histogram(x, bins=grid)[0], 0.05)
    assert np.trapezoid(fine, grid) == pytest.approx(1.0, rel=1e-3)
    # the cells' own counts, not a sample: the same rows in another order give the same density
    np.testing.assert_array_equal(binned_kde_at(points, np.histogram(rng.permutation(x), bins=points)[0], 0.05), d)


def test_binned_kde_against_the_sum_over_rows(rng):
    """Each cell's rows spread evenly over it, then smoothed: the same as smoothing a fine even spread of
    every cell's rows, term by term (a float64 reference by numerical integration)."""
    points = np.sort(np.concatenate([[0.0, 10.0], rng.uniform(0, 10, 40)]))
    rows = rng.integers(0, 500, len(points) - 1).astype(float)
    h = 0.3
    got = binned_kde_at(points, rows, h)
    ref = np.zeros(len(points))
    for a, b, n in zip(points[:-1], points[1:], rows):
        u = np.linspace(a, b, 4001)
        for src in (u, -u, 20.0 - u):  # the cell and its mirror images about 0 and 10
            ref += n * np.trapezoid(np.exp(-0.5 * ((points[:, None] - src[None, :]) / h) ** 2), u, axis=1) \
                / ((b - a) * h * np.sqrt(2 * np.pi))
    np.testing.assert_allclose(got, ref / rows.sum(), rtol=2e-6, atol=1e-9)


def linear_binning_on(points, x):
    """Linear binning onto an arbitrary increasing grid (reference for the tests)."""
    k = np.clip(np.searchsorted(points, x, side="right") - 1, 0, len(points) - 2)
    t = (x - points[k]) / (points[k + 1] - points[k])
    return np.bincount(k, 1 - t, len(points)) + np.bincount(k + 1, t, len(points))


def test_cell_prefix():
    assert cell_prefix(np.array([2.0, 3.0])) == [0.0, 2.0, 5.0]


def test_atoms_and_candidates(rng):
    x = np.concatenate([np.full(500, 3.0), np.full(40, 7.0), rng.uniform(0, 10, 9460)])
    candidates = atom_candidates(x[rng.permutation(len(x))[:5000]])
    assert 3.0 in candidates
    atoms = Atoms.from_counts([7.0, 3.0, 1.5], [40, 500, 3], min_count=10)
    np.testing.assert_array_equal(atoms.values, [3.0, 7.0])
    count, total = atoms.cumulative()
    assert count == [500, 540] and total == [1500, 1780]
    assert atoms.rows == 540
    top = Atoms.from_counts([1.0, 2.0, 3.0, 4.0], [5, 9, 9, 1]).largest(2)
    np.testing.assert_array_equal(top.values, [2.0, 3.0])


def test_bandwidth_rates():
    assert scale_bandwidth(1.0, 1000, 8000, "plugin_cdf") == pytest.approx(0.5)
    assert scale_bandwidth(1.0, 1000, 32000, "plugin") == pytest.approx(0.5)
    assert scale_bandwidth(1.0, 1000, 500, "plugin") == 1.0


def test_plugin_cdf_on_normal_data_is_near_the_amise_value():
    x = np.random.default_rng(21).standard_normal(20000)
    # For N(0, 1): R(f') = 1/(4√π), so h_F = (4/n)^{1/3}.
    assert bandwidth.plugin_cdf(x, backend="native").h == pytest.approx((4 / 20000) ** (1 / 3), rel=0.05)


def test_quantile_grid_and_positions(rng):
    from pg_kde.synopsis import grid_positions, quantile_grid

    x = np.concatenate([rng.normal(0, 1, 9000), rng.uniform(50, 1000, 1000)])  # dense core, long tail
    g, lattice = quantile_grid(x, x.min(), x.max(), False, 64)
    assert lattice is None
    assert g[0] == x.min() and g[-1] == x.max() and np.all(np.diff(g) > 0) and len(g) <= 64
    counts = np.histogram(x, g)[0]
    assert counts.max() < 4 * len(x) / 63  # about equal depth, unlike 64 equal-width cells
    k = rng.integers(0, 40, 5000).astype(float)
    gi, _ = quantile_grid(k, 0.0, 39.0, True, 200)
    assert gi[0] == -0.5 and gi[-1] == 39.5 and np.all(gi % 1 == 0.5)  # one cell per value: 40 cells
    assert len(gi) == 41
    np.testing.assert_allclose(grid_positions(np.array([-0.5, 0.0, 39.5]), gi), [0.0, 0.5, 40.0])
    r = np.round(rng.normal(50, 10, 5000) * 1.8, 2)  # discretised, not on a regular lattice
    gr, lattice = quantile_grid(r, r.min(), r.max(), False, 64)
    assert lattice is not None and len(gr) <= 64
    assert not np.isin(gr, lattice).any()  # no value sits on a cell edge


def test_heavy_values_on_a_continuous_axis_get_cells_of_their_own(rng):
    """A value with a cell's share of the sample gets [v, next float) (0: [0, smallest normal)); a subnormal
    one cannot; the grid keeps its size; only those cells are ties (the query's test)."""
    from pg_kde.synopsis import quantile_grid
    from pg_kde.synopsis.maths import is_tie_cell, tie_cell

    tiny = np.finfo(np.float64).tiny
    x = rng.gamma(2.0, 3.0, 20000)
    x[:4000], x[4000:5000], x[5000:6000] = 5.0, 0.0, 1e-310
    g, lattice = quantile_grid(x, 0.0, x.max(), False, 64)
    assert lattice is None and len(g) <= 64 and np.all(np.diff(g) > 0)
    k = int(np.searchsorted(g, 5.0))
    assert g[k] == 5.0 and g[k + 1] == np.nextafter(5.0, np.inf) and g[0] == 0.0 and g[1] == tiny
    ties = [i for i in range(len(g) - 1) if is_tie_cell(g[i], g[i + 1])]
    assert ties == [0, k]
    counts = np.histogram(x, g)[0]
    assert counts[k] == 4000 and counts[0] == 1000 + 1000  # 0 and the subnormal 1e-310 share [0, tiny)
    assert tie_cell(1e-310) == (0.0, tiny) and tie_cell(-1e-310) is None
    assert tie_cell(-5.0) == (-5.0, np.nextafter(-5.0, np.inf))


def test_grids_keep_their_size_and_heavy_values_off_their_lines(rng):
    """Heavy values beyond the tie cells' room: the grid keeps its size; no other point sits on a value the
    sample holds more than once (the red team: 12 values of 7.9% each at m = 12 got one tie cell, and a line on
    each of the others left its rows out of boxes ending at it); a heavy maximum gets its cell, the grid's end
    moving out to it."""
    from pg_kde.synopsis import quantile_grid
    from pg_kde.synopsis.maths import is_tie_cell

    x = rng.gamma(2.0, 3.0, 60000)
    heavy = np.round(rng.normal(0, 20, 12), 3)
    x = np.where(rng.random(60000) < 0.95, rng.choice(heavy, 60000), x)
    for size in (7, 12, 45):
        g, _ = quantile_grid(x, x.min(), x.max(), False, size)
        assert len(g) <= size + 2 and np.all(np.diff(g) > 0)  # (+2: the table's ends, as before 0.9.0)
        values, counts = np.unique(x, return_counts=True)
        tied = {g[i] for i in range(len(g) - 1) if is_tie_cell(g[i], g[i + 1])}
        on_lines = set(g) & set(values[counts >= 2]) - tied - {x.min(), x.max()}
        assert not on_lines, (size, on_lines)
    top = np.concatenate([rng.gamma(2.0, 3.0, 40000), np.full(10000, 80.0)])
    g, _ = quantile_grid(top, top.min(), 80.0, False, 45)
    assert g[-2] == 80.0 and g[-1] == np.nextafter(80.0, np.inf)


def test_smooth_masses_2d_preserves_mass_and_follows_correlation(rng):
    from pg_kde.synopsis import smooth_masses_2d

    w = np.zeros((41, 41))
    w[20, 20] = 100.0
    m = smooth_masses_2d(w, (1.0, 1.0), np.array([[4.0, 3.0], [3.0, 4.0]]))
    assert m.sum() == pytest.approx(100.0)
    assert m[23, 23] > m[23, 17]  # positive correlation spreads mass along the diagonal
    assert np.array_equal(smooth_masses_2d(w, (1.0, 1.0), np.zeros((2, 2))), w)
