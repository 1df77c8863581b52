"""Loading a script of benchmarks/ as a module, for the tests that run a benchmark's own code."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(script: str) -> ModuleType:
    """benchmarks/``script`` executed afresh as the module pg_kde_bench_<its stem>, registered in sys.modules
    (dataclasses resolve their module by name)."""
    spec = importlib.util.spec_from_file_location(f"pg_kde_bench_{Path(script).stem}", BENCHMARKS / script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
