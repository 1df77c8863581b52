"""Every fast backend against the float64 reference on the same inputs: bandwidths within 1e-9 relative
in float64 and 1e-5 in float32 (the issue's parity requirement), for every native instruction set, for
the CUDA kernels in the host emulator and, marked gpu, on a CUDA device."""

import itertools

import numpy as np
import pytest

from pg_kde import bandwidth, kde

RTOL = {"float64": 1e-9, "float32": 1e-5}


def rel_err(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    mix = np.where(rng.random(1500) < 0.3, rng.normal(-2, 0.5, 1500), rng.normal(1, 1, 1500))
    corr = rng.multivariate_normal([0, 0], [[1.0, 0.7], [0.7, 2.0]], size=500)
    d4 = rng.standard_normal((200, 4)) @ rng.standard_normal((4, 4))
    return {"mix": mix, "corr": corr, "d4": d4, "d16": rng.standard_normal((160, 16))}


@pytest.fixture(scope="module")
def reference(data):
    return {
        "plugin": bandwidth.plugin(data["mix"], backend="reference"),
        "plugin_cdf": bandwidth.plugin_cdf(data["mix"], backend="reference"),
        "lscv_h": bandwidth.lscv_h(data["corr"], backend="reference"),
        "lscv_h_16": bandwidth.lscv_h(data["d16"], backend="reference"),
        "lscv_H": bandwidth.lscv_H(data["corr"], backend="reference"),
        "lscv_H_4": bandwidth.lscv_H(data["d4"], backend="reference"),
    }


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_plugin_parity(parity_backend, dtype, data, reference):
    r = bandwidth.plugin(data["mix"], backend=parity_backend, dtype=dtype)
    assert (r.backend, r.dtype) == (parity_backend, dtype)
    assert rel_err(r.h, reference["plugin"].h) <= RTOL[dtype]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_plugin_cdf_parity(parity_backend, dtype, data, reference):
    r = bandwidth.plugin_cdf(data["mix"], backend=parity_backend, dtype=dtype)
    assert rel_err(r.h, reference["plugin_cdf"].h) <= RTOL[dtype]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case, key", [("corr", "lscv_h"), ("d16", "lscv_h_16")])
def test_lscv_h_parity(parity_backend, dtype, case, key, data, reference):
    r = bandwidth.lscv_h(data[case], backend=parity_backend, dtype=dtype)
    assert rel_err(r.h, reference[key].h) <= RTOL[dtype]
    assert rel_err(r.H, reference[key].H) <= 2 * RTOL[dtype]
    assert rel_err(r.objective, reference[key].objective) <= RTOL[dtype]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case, key", [("corr", "lscv_H"), ("d4", "lscv_H_4")])
def test_lscv_H_parity(parity_backend, dtype, case, key, data, reference):
    r = bandwidth.lscv_H(data[case], backend=parity_backend, dtype=dtype)
    assert r.details["polish"]["converged"]
    assert rel_err(r.H, reference[key].H) <= RTOL[dtype]
    assert rel_err(r.objective, reference[key].objective) <= RTOL[dtype]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sequential_backend_parity(dtype, data, reference):
    assert rel_err(bandwidth.plugin(data["mix"], backend="sequential", dtype=dtype).h, reference["plugin"].h) <= RTOL[dtype]
    assert rel_err(bandwidth.lscv_h(data["corr"], backend="sequential", dtype=dtype).h, reference["lscv_h"].h) <= RTOL[dtype]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_objective_parity(parity_backend, dtype, data):
    X = data["d4"]
    H = np.cov(X, rowvar=False) * 0.3
    ref = bandwidth.lscv_H_objective(X, H, backend="reference")
    assert rel_err(bandwidth.lscv_H_objective(X, H, backend=parity_backend, dtype=dtype), ref) <= RTOL[dtype]
    hs = np.geomspace(0.2, 2.0, 11)
    ref_h = bandwidth.lscv_h_objective(X, hs, backend="reference")
    assert rel_err(bandwidth.lscv_h_objective(X, hs, backend=parity_backend, dtype=dtype), ref_h) <= RTOL[dtype]


@pytest.mark.parametrize("est1, est2", list(itertools.combinations(["reference", "native", "sequential"], 2)))
def test_kde_evaluate_backends_agree(est1, est2, data):
    sample = data["corr"]
    points = np.random.default_rng(3).standard_normal((64, 2)) * 2
    H = bandwidth.normal_reference(sample).H
    np.testing.assert_allclose(
        kde.evaluate(points, sample, H, backend=est1), kde.evaluate(points, sample, H, backend=est2), rtol=1e-11
    )


def test_kde_evaluate_float32(parity_backend, data):
    sample = data["mix"]
    grid = np.linspace(-5, 5, 333)
    ref = kde.evaluate(grid, sample, 0.3, backend="reference")
    np.testing.assert_allclose(kde.evaluate(grid, sample, 0.3, backend=parity_backend, dtype="float32"), ref, rtol=1e-5)
