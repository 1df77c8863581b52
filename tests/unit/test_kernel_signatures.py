"""The argument tuples the cuda backend passes to ``launch`` match the ``extern "C" __global__`` signatures of
the installed .cu files, by position and type. CuPy packs each argument by its own type, not the kernel's,
so a swapped or missing argument is not a compile error anywhere: the kernel reads garbage.

The signatures are written through X-macros (one template per kernel family, a list of names and types),
so the files are run through the C preprocessor first (what NVRTC does too) and the expanded
``extern "C" __global__ void name(...)`` declarations are parsed. Every backend primitive then runs in the
host emulator through an executor that checks each launch before running it: the kernel exists, the
argument count matches, and each argument has the NumPy type of its C parameter (:data:`C_TYPES`), with
pointers given as device arrays (what the executor's ``to_device``/``zeros`` returned) of that element type.
"""

import importlib
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pg_kde.backend import cuda as _cuda

#: The NumPy type each C type of a kernel parameter takes (CuPy packs a NumPy scalar by its dtype); for a
#: pointer, the element dtype of the device array. const/volatile/__restrict__ do not matter.
C_TYPES = {
    "int": np.int32,
    "unsigned": np.uint32,
    "unsigned int": np.uint32,
    "long long": np.int64,
    "unsigned long long": np.uint64,
    "float": np.float32,
    "double": np.float64,
}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict"}
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)')


@dataclass(frozen=True)
class Param:
    text: str  # as written, e.g. "const float* x"
    base: str  # the C type without qualifiers and pointer, e.g. "float"
    pointer: bool
    name: str

    @property
    def dtype(self) -> np.dtype:
        if self.base not in C_TYPES:
            raise AssertionError(f"no NumPy type is mapped for the C type {self.base!r} of {self.text!r}; "
                                 "add it to C_TYPES")
        return np.dtype(C_TYPES[self.base])


def parse_param(text: str) -> Param:
    tokens = re.findall(r"\*|\w+", text)
    stars = tokens.count("*")
    assert stars <= 1, f"pointer to pointer {text!r}: not a kernel parameter the backend can pass"
    words = [t for t in tokens if t != "*" and t not in _QUALIFIERS]
    assert len(words) >= 2, f"cannot read the parameter {text!r} (a type and a name are needed)"
    return Param(text=" ".join(text.split()), base=" ".join(words[:-1]), pointer=stars == 1, name=words[-1])


def preprocess(path: Path) -> str:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("reading the kernel signatures needs the C preprocessor (g++); make system-deps "
                    "installs it")
    result = subprocess.run([compiler, "-E", "-P", "-x", "c++", "-std=c++17", f"-I{path.parent}", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, f"preprocessing {path} failed:\n{result.stderr}"
    return result.stdout


def kernel_signatures(directory: Path) -> dict:
    """{kernel name: (file name, [Param, ...])} for every extern "C" __global__ kernel of directory/*.cu."""
    signatures = {}
    for path in sorted(Path(directory).glob("*.cu")):
        for name, params in _KERNEL.findall(preprocess(path)):
            assert name not in signatures, f"{name} is defined twice ({signatures[name][0]}, {path.name})"
            text = params.strip()
            parsed = [] if text in ("", "void") else [parse_param(p) for p in text.split(",")]
            signatures[name] = (path.name, parsed)
    return signatures


def describe(arg) -> str:
    if isinstance(arg, np.ndarray):
        return f"an array of {arg.dtype}"
    return f"{type(arg).__module__}.{type(arg).__name__} {arg!r}"


def signature_problems(kernel: str, args, signatures: dict, is_device_array) -> list:
    """What is wrong with launching ``kernel`` with ``args`` (empty if nothing)."""
    if kernel not in signatures:
        return [f"{kernel}: no extern \"C\" __global__ kernel of that name in the .cu files"]
    filename, params = signatures[kernel]
    where = f"{kernel} ({filename})"
    problems = []
    if len(args) != len(params):
        problems.append(f"{where}: {len(args)} arguments for {len(params)} parameters "
                        f"({', '.join(p.text for p in params)})")
    for position, (param, arg) in enumerate(zip(params, args)):
        at = f"{where}, argument {position} for `{param.text}`"
        if param.pointer:
            if not isinstance(arg, np.ndarray) or not is_device_array(arg):
                problems.append(f"{at}: expects a device array of {param.dtype}, got {describe(arg)}")
            elif arg.dtype != param.dtype:
                problems.append(f"{at}: expects a device array of {param.dtype}, got one of {arg.dtype}")
        elif not isinstance(arg, np.generic) or arg.dtype != param.dtype:
            problems.append(f"{at}: expects numpy.{param.dtype.name}, got {describe(arg)}")
    return problems


class CheckingExecutor:
    """Wraps the emulator's executor: every launch is recorded and checked against the kernel signatures
    before it runs (a mismatched tuple would make the emulated kernel read garbage)."""

    def __init__(self, inner, signatures):
        self.inner, self.signatures = inner, signatures
        self.xp, self.sm_count = inner.xp, inner.sm_count
        self.device_arrays = []  # kept alive, so that identity tells a device array from a host one
        self.launches = []

    def is_device_array(self, a) -> bool:
        return any(a is b for b in self.device_arrays)

    def to_device(self, a):
        out = self.inner.to_device(a)
        self.device_arrays.append(out)
        return out

    def zeros(self, size):
        out = self.inner.zeros(size)
        self.device_arrays.append(out)
        return out

    def to_host(self, a):
        return self.inner.to_host(a)

    def synchronize(self):
        self.inner.synchronize()

    def launch(self, kernel, grid, block, args, shared_bytes):
        args = tuple(args)
        self.launches.append((kernel, args))
        problems = signature_problems(kernel, args, self.signatures, self.is_device_array)
        assert not problems, "\n".join(problems)
        self.inner.launch(kernel, grid, block, args, shared_bytes)


@pytest.fixture(scope="module")
def signatures():
    return kernel_signatures(_cuda.kernel_dir())


@pytest.fixture
def checking_cuda(emulated_cuda, signatures):
    """make(reduction) -> (a CudaBackend with small tiles whose launches are checked, its executor)."""

    def make(reduction, **options):
        executor = CheckingExecutor(emulated_cuda(reduction).executor, signatures)
        sizes = {"block": 32, "pair_tile": 8, "buffer": 16}
        return _cuda.CudaBackend(reduction, executor=executor, **sizes, **options), executor

    return make


W = 2.0**2.5  # LSCV's w for d = 3


def run_every_primitive(be, dtype):
    """Each primitive in each form that picks a different kernel or argument tuple."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(70)
    for order in (2, 4, 6):
        be.plugin_pair_sum(x, 0.4, order, dtype)
    be.plugin_pair_sum(x, 0.4, 4, dtype, interrupt=lambda: None)  # batched launches, offsets > 0
    z = rng.standard_normal((45, 3))
    scales = np.array([0.5, 1.0, 2.0])
    for derivative in (False, True):
        be.lscv_pair_sums(z, scales, W, derivative, dtype)
    be.lscv_pair_sums(z, scales, W, True, dtype, interrupt=lambda: None)
    be.lscv_moments(z, W, dtype)
    be.lscv_moments(z[:, :1], 2.0**1.5, dtype)
    for d in (1, 2, 3, 4, 5):  # kde_sums_*_d1 … _d4, then _dn
        be.kde_sums(rng.standard_normal((40, d)), rng.standard_normal((30, d)), dtype)
    be.kde_sums(rng.standard_normal((40, 2)), rng.standard_normal((30, 2)), dtype, interrupt=lambda: None)


def test_the_kernel_files_declare_every_family_in_both_precisions(signatures):
    assert len(signatures) >= len(_cuda.KERNEL_FILES) * 2
    for name, (filename, params) in signatures.items():
        assert _cuda.kernel_file(name) == filename, f"{name} is in {filename}, not {_cuda.kernel_file(name)}"
        assert params, name
        assert all(isinstance(p.dtype, np.dtype) for p in params)  # every C type is mapped
        # The suffix names the working precision: no parameter of the other one, except the double* output.
        other = {"f32": "double", "f64": "float"}[re.search(r"_(f32|f64)(_|$)", name).group(1)]
        assert all(p.base != other or (p.pointer and p.name == "out") for p in params), (name, params)
        assert sum(p.pointer and p.base == "double" and p.name == "out" for p in params) == 1, name
    for family in _cuda.KERNEL_FILES:
        for suffix in ("f32", "f64"):
            assert any(name.startswith(f"{family}_{suffix}") for name in signatures), (family, suffix)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", list(_cuda.REDUCTIONS))
def test_every_launch_matches_its_kernel_signature(reduction, dtype, checking_cuda, signatures):
    be, executor = checking_cuda(reduction, slice_terms=4096)
    run_every_primitive(be, dtype)  # each launch is checked as it is made (CheckingExecutor.launch)
    suffix = "f32" if dtype == "float32" else "f64"
    launched = {kernel for kernel, _ in executor.launches}
    expected = {name for name in signatures if re.search(rf"_{suffix}(_|$)", name)}
    assert launched == expected, (
        f"not launched: {sorted(expected - launched)}; not declared: {sorted(launched - expected)}"
    )
    offsets = [args[3] for kernel, args in executor.launches if kernel.startswith("plugin")]
    assert max(offsets) > 0, "the interrupt's batches (offset > 0) were not exercised"


def first_launches(checking_cuda):
    be, executor = checking_cuda("partials")
    run_every_primitive(be, "float32")
    seen = {}
    for kernel, args in executor.launches:
        family = re.sub(r"_f(32|64).*$", "", kernel)
        seen.setdefault(family, (kernel, args))
    return executor, seen


def test_the_check_fails_on_swapped_missing_extra_and_host_arguments(checking_cuda, signatures):
    executor, seen = first_launches(checking_cuda)
    device = executor.is_device_array

    def problems(kernel, args):
        return signature_problems(kernel, args, signatures, device)

    for kernel, args in seen.values():
        assert problems(kernel, args) == []
        params = signatures[kernel][1]
        # Two neighbours of different type swapped.
        k = next(k for k in range(len(args) - 1) if params[k].pointer != params[k + 1].pointer
                 or params[k].dtype != params[k + 1].dtype)
        swapped = args[:k] + (args[k + 1], args[k]) + args[k + 2:]
        assert len(problems(kernel, swapped)) >= 2
        assert "arguments for" in " ".join(problems(kernel, args[:-1]))  # a parameter only in C
        assert "arguments for" in " ".join(problems(kernel, args + (np.int32(0),)))  # one only in Python
        # A Python int, a scalar of the other width, a host array, an array of the other precision.
        scalar = next(k for k, p in enumerate(params) if not p.pointer)
        assert problems(kernel, args[:scalar] + (int(args[scalar]),) + args[scalar + 1:])
        other = np.uint32 if params[scalar].dtype != np.uint32 else np.uint64
        assert problems(kernel, args[:scalar] + (other(args[scalar]),) + args[scalar + 1:])
        assert problems(kernel, (np.array(args[0]),) + args[1:])
        assert problems(kernel, (executor.to_device(args[0].astype(np.float64)),) + args[1:])
    assert problems("no_such_kernel_f32", ()) != []


def test_the_check_fails_when_a_signature_changes_in_the_source(checking_cuda, signatures, tmp_path):
    executor, seen = first_launches(checking_cuda)
    directory = _cuda.kernel_dir()
    for name in ("common.cuh", "kde.cu", "pair_sums.cu"):
        shutil.copy(directory / name, tmp_path / name)
    source = (tmp_path / "pair_sums.cu").read_text()
    # Two parameters of different type swapped in the LSCV signature, and one added to PLUGIN's.
    old_lscv = "unsigned long long n, int d, unsigned P,"
    old_plugin = "unsigned long long offset, int reduction, double* out) {"
    assert source.count(old_lscv) == 2 and source.count(old_plugin) == 1
    source = source.replace(old_lscv, "int d, unsigned long long n, unsigned P,", 1)
    source = source.replace(old_plugin, "unsigned long long offset, int reduction, double* out, int extra) {")
    (tmp_path / "pair_sums.cu").write_text(source)
    mutated = kernel_signatures(tmp_path)
    for family in ("lscv_pair_sums", "plugin_pair_sum"):
        kernel, args = seen[family]
        assert signature_problems(kernel, args, mutated, executor.is_device_array), family
    kernel, args = seen["lscv_moments"]
    assert signature_problems(kernel, args, mutated, executor.is_device_array) == []  # untouched


def test_the_kernel_files_name_python_objects_that_exist():
    # Comments in the kernels point at the Python that drives them (e.g. pg_kde.backend.cuda.grid_for).
    for path in sorted(_cuda.kernel_dir().glob("*.cu*")):
        for dotted in sorted(set(re.findall(r"\bpg_kde(?:\.\w+)+", path.read_text()))):
            parts = dotted.split(".")
            for split in range(len(parts), 0, -1):
                try:
                    target = importlib.import_module(".".join(parts[:split]))
                    break
                except ImportError:
                    continue
            for attribute in parts[split:]:
                assert hasattr(target, attribute), f"{path.name} names {dotted}, which does not exist"
                target = getattr(target, attribute)
