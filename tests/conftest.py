"""Shared fixtures. The tests import the installed pg_kde (pytest runs with --import-mode=importlib), so
the compiled module under test is the one `pip install .` built."""

import numpy as np
import pytest

import pg_kde


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


def native_isas():
    from pg_kde import _native

    return _native.available_isas()


def cuda_device_available() -> bool:
    return pg_kde.backends()["cuda"] is None


def pytest_collection_modifyitems(config, items):
    if cuda_device_available():
        return
    skip = pytest.mark.skip(reason="no CUDA backend or device here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


