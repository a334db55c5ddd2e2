"""The CuPy engine's CUDA kernel bodies, compiled as C++ and run on the CPU.

Without a GPU the CuPy engine runs only its NumPy references, so its two raw CUDA
element-wise kernels (``_STATIONARY_SRC`` and ``_NN_SRC`` in
:mod:`kernelkit.backend._cupy`) would never execute. Their bodies use only C++
that is also valid host code, so here each one is wrapped, with the parameter
declarations that :class:`CupyBackend` gives ``cupy.ElementwiseKernel``, in a C++
translation unit::

    extern "C" void run(const double* sx, ..., double* g_arr, long long n_total) {
        for (long long i = 0; i < n_total; ++i) { double& g = g_arr[i]; <body> }
    }

compiled with ``g++`` and loaded with :mod:`ctypes`. A stand-in for the ``cupy``
module (NumPy arrays, this ``ElementwiseKernel``) then drives the engine's real GPU
code path, so the arguments the engine passes (order, ravelled row statistics,
``inv_ell``, tolerances) are checked along with the bodies, against the
:class:`ArrayBackend` references.
"""

import ctypes
import operator
import re
import shutil
import subprocess

import numpy as np
import pytest
from numpy.testing import assert_allclose

import kernelkit
from kernelkit.backend import KernelSpec, _cupy
from kernelkit.backend._array import ACTIVATION_CODES, CANCELLATION, STATIONARY_CODES, ArrayBackend
from kernelkit.backend._cupy import CupyBackend

GXX = shutil.which("g++")
if GXX is None:
    pytest.skip("g++ is needed to compile the CUDA kernel bodies as C++",
                allow_module_level=True)

RTOL = 1e-12
REFERENCE = ArrayBackend(np)

_CTYPES = {"float64": ctypes.c_double, "int64": ctypes.c_longlong, "int32": ctypes.c_int,
           "bool": ctypes.c_bool}
_CXX = {"float64": "double", "int64": "long long", "int32": "int", "bool": "bool"}
_PARAM = re.compile(r"^(raw\s+)?(float64|int64|int32|bool)\s+([A-Za-z]\w*)$")


def parse_params(decl):
    """``"raw float64 sx, int64 m"`` -> ``[(True, "float64", "sx"), (False, "int64", "m")]``."""
    out = []
    for item in decl.split(","):
        match = _PARAM.match(item.strip())
        assert match, f"unsupported parameter declaration {item!r}"
        out.append((match.group(1) is not None, match.group(2), match.group(3)))
    return out


def translation_unit(in_params, out_params, body):
    """C++ source running ``body`` once per element, as the CUDA kernel does per thread."""
    ins, outs = parse_params(in_params), parse_params(out_params)
    assert len(outs) == 1 and outs[0][:2] == (False, "float64"), out_params
    out_name = outs[0][2]
    args = [f"const double* {name}" if raw else f"const {_CXX[t]} {name}"
            for raw, t, name in ins]
    assert all(t == "float64" for raw, t, _ in ins if raw)
    args += [f"double* {out_name}_arr", "long long n_total"]
    return (
        "#include <cmath>\n"
        "using namespace std;\n"
        f'extern "C" void run({", ".join(args)}) {{\n'
        "    for (long long i = 0; i < n_total; ++i) {\n"
        f"        double& {out_name} = {out_name}_arr[i];\n"
        f"{body}\n"
        "    }\n"
        "}\n"
    )


class _CompiledKernel:
    """What ``cupy.ElementwiseKernel`` would build, as a host shared library.

    Compilation starts in the constructor and is waited for on the first call, so
    kernels created together compile concurrently.
    """

    def __init__(self, in_params, out_params, operation, name, workdir):
        self.name = name
        self.ins = parse_params(in_params)
        self.calls = 0
        src = workdir / f"{name}.cpp"
        self.lib_path = workdir / f"{name}.so"
        src.write_text(translation_unit(in_params, out_params, operation))
        # -ffp-contract=off: no fused multiply-adds, so results do not depend on the host ISA
        self._proc = subprocess.Popen(
            [GXX, "-O1", "-shared", "-fPIC", "-ffp-contract=off",
             "-o", str(self.lib_path), str(src)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._fn = None

    def _load(self):
        log, _ = self._proc.communicate(timeout=120)
        assert self._proc.returncode == 0, f"g++ failed on {self.name}:\n{log}"
        fn = ctypes.CDLL(str(self.lib_path)).run
        fn.restype = None
        fn.argtypes = [ctypes.POINTER(ctypes.c_double) if raw else _CTYPES[t]
                       for raw, t, _ in self.ins]
        fn.argtypes += [ctypes.POINTER(ctypes.c_double), ctypes.c_longlong]
        self._fn = fn

    def __call__(self, *args):
        """Argument checks as strict as CuPy's, then one pass over the output's elements."""
        if self._fn is None:
            self._load()
        assert len(args) == len(self.ins) + 1, f"{self.name}: {len(args)} arguments"
        keep, cargs = [], []
        for (raw, t, name), a in zip(self.ins, args, strict=False):
            if raw:
                if not isinstance(a, np.ndarray) or a.dtype != np.float64:
                    raise TypeError(f"{self.name}: {name} must be a float64 array, got {a!r}")
                a = np.ascontiguousarray(a)  # a raw array is indexed in logical C order
                keep.append(a)
                cargs.append(a.ctypes.data_as(ctypes.POINTER(ctypes.c_double)))
            elif t == "bool":
                if not isinstance(a, (bool, np.bool_)):
                    raise TypeError(f"{self.name}: {name} must be a bool, got {a!r}")
                cargs.append(bool(a))
            elif t in ("int64", "int32"):
                v = operator.index(a)
                bits = 63 if t == "int64" else 31
                assert -(2**bits) <= v < 2**bits, f"{self.name}: {name}={v} overflows {t}"
                cargs.append(v)
            else:
                if isinstance(a, np.ndarray):
                    raise TypeError(f"{self.name}: {name} must be a scalar, got an array")
                cargs.append(float(a))
        out = args[-1]
        assert isinstance(out, np.ndarray) and out.dtype == np.float64, f"{self.name}: output"
        buf = np.ascontiguousarray(out)  # i is the output's logical C-order index
        self._fn(*cargs, buf.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), buf.size)
        if buf is not out:
            out[...] = buf
        self.calls += 1
        return out


class _HostCupy:
    """A stand-in for the ``cupy`` module: NumPy arrays plus the compiled kernels."""

    __name__ = "cupy"

    def __init__(self, workdir):
        self._workdir = workdir
        self.kernels = []

    def ElementwiseKernel(self, in_params, out_params, operation, name):  # noqa: N802
        kernel = _CompiledKernel(in_params, out_params, operation, name, self._workdir)
        self.kernels.append((in_params, out_params, operation, kernel))
        return kernel

    def __getattr__(self, attr):
        return getattr(np, attr)


@pytest.fixture(scope="module")
def gpu(tmp_path_factory):
    """The CuPy engine on its GPU code path, its CUDA kernels running as host C++."""
    xp = _HostCupy(tmp_path_factory.mktemp("cuda_sources"))
    engine = CupyBackend(xp=xp)
    assert engine._on_gpu
    stationary, nn = engine._kernel("stationary"), engine._kernel("nn")  # compile both now
    # the engine declares exactly the module's parameter strings and bodies
    assert [k[:3] for k in xp.kernels] == [
        (_cupy._STATIONARY_PARAMS, "float64 g", _cupy._STATIONARY_SRC),
        (_cupy._NN_PARAMS, "float64 g", _cupy._NN_SRC)]
    assert stationary.name == "kernelkit_stationary" and nn.name == "kernelkit_nn"
    return engine


def _data():
    """X (13, 5), Y (9, 5) with the pairs the kernels' special branches exist for."""
    rng = np.random.default_rng(1234)
    X = rng.standard_normal((13, 5))
    Y = rng.standard_normal((9, 5))
    X[2] = 0.0                                        # all-zero row
    X[5] = 2.0 * X[3]                                 # parallel to X[3] (self case)
    X[6] = X[3] + 1e-9 * rng.standard_normal(5)       # nearly parallel / nearly duplicate
    X[10] = X[11]                                     # exact duplicate (self case)
    Y[1] = 2.0 * X[1]                                 # parallel
    Y[2] = X[4] + 1e-9 * rng.standard_normal(5)       # nearly parallel / nearly duplicate
    Y[3] = X[7]                                       # exact duplicate
    Y[4] = X[8] + 1e-6 * rng.standard_normal(5)       # close: cancellation branch
    Y[6] = 0.0                                        # all-zero row
    return X, Y


# (Y given?, first row of the block): k(X, Y), and row blocks of k(X, X) whose
# self-pairs sit at column self_offset + row
CASES = [(True, 0), (False, 0), (False, 4)]
CASE_IDS = ["XY", "XX-offset0", "XX-offset4"]


def _blocks(spec, with_y, r0):
    X, Y = _data()
    ctx = REFERENCE._prepare(spec, X, Y if with_y else None)  # what the driver computes
    Xb, Yb = ctx["X"][r0:], ctx["Y"]
    sx, sy = ctx["sx"][r0:], ctx["sy"]
    G = Xb @ Yb.T
    return G, sx, sy, Xb, Yb, (-1 if with_y else r0)


def _check(got, ref):
    assert np.isfinite(ref).all(), "non-finite reference values"
    bad = np.argwhere(~np.isfinite(got)).tolist()
    assert not bad, f"non-finite values from the CUDA body at {bad}"
    assert_allclose(got, ref, rtol=RTOL, atol=1e-14 * np.abs(ref).max())


def _off_self(mask, self_offset):
    if self_offset >= 0:
        rows = np.arange(mask.shape[0])
        mask = mask.copy()
        mask[rows, rows + self_offset] = False
    return mask


@pytest.mark.parametrize("with_y, r0", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("name, nu", [("rbf", None), ("matern", 0.5), ("matern", 1.5),
                                      ("matern", 2.5)])
def test_stationary_source_matches_reference(gpu, name, nu, with_y, r0):
    gamma = 0.3
    spec = KernelSpec(name, (gamma,) if nu is None else (gamma, nu))
    code = STATIONARY_CODES[(name, nu)]
    G, sx, sy, Xb, Yb, self_offset = _blocks(spec, with_y, r0)
    # the data reach the recomputed-distance branch away from the self-pairs
    d2 = sx[:, None] + sy[None, :] - 2.0 * G
    assert _off_self(d2 <= CANCELLATION * (sx[:, None] + sy[None, :]), self_offset).any()

    ref = G.copy()
    REFERENCE._stationary(code, ref, ref, sx, sy, gamma, self_offset, False, Xb, Yb)
    got = G.copy()
    calls = gpu._kernel("stationary").calls
    gpu._stationary(code, got, got, sx, sy, gamma, self_offset, False, Xb, Yb)
    assert gpu._kernel("stationary").calls == calls + 1
    _check(got, ref)
    if self_offset >= 0:
        rows = np.arange(G.shape[0])
        assert (got[rows, rows + self_offset] == 1.0).all()


@pytest.mark.parametrize("with_y, r0", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("want_ntk", [True, False], ids=["ntk", "nngp"])
@pytest.mark.parametrize("w2, b2", [(1.0, 0.0), (2.0, 0.25)], ids=["nobias", "bias"])
@pytest.mark.parametrize("depth", [1, 3])
@pytest.mark.parametrize("act", ["relu", "erf"])
def test_nn_source_matches_reference(gpu, act, depth, w2, b2, want_ntk, with_y, r0):
    spec = KernelSpec("ntk" if want_ntk else "nngp", (depth, act, w2, b2))
    G, sx, sy, Xb, Yb, self_offset = _blocks(spec, with_y, r0)
    assert sx.shape == (G.shape[0], depth + 1) and sy.shape == (G.shape[1], depth + 1)
    inv_d = 1.0 / Xb.shape[1]
    if act == "relu":  # the data reach the input-defect recomputation away from self-pairs
        K, p = G * inv_d, sx[:, :1] * sy[:, 0]
        assert _off_self((K > (1.0 - CANCELLATION) * p) & (p > 0), self_offset).any()

    args = (sx, sy, depth, ACTIVATION_CODES[act], w2, b2, inv_d, want_ntk, self_offset, False,
            Xb, Yb)
    ref = G.copy()
    REFERENCE._nn(ref, ref, *args)
    got = G.copy()
    calls = gpu._kernel("nn").calls
    gpu._nn(got, got, *args)
    assert gpu._kernel("nn").calls == calls + 1
    _check(got, ref)


@pytest.mark.parametrize("want_ntk", [True, False], ids=["ntk", "nngp"])
@pytest.mark.parametrize("depth", [1, 2])
def test_nn_source_antiparallel_relu_without_bias(gpu, depth, want_ntk):
    """Anti-parallel relu pairs, no bias: the layer-1 defect comes out of a 0/0.

    With ``b2 = 0`` the defect after the affine step is ``num / den`` with both
    factors ``~ sqrt(q_x q_y) + K``, which is pure rounding for ``y = -c x``; it can
    be negative, and the relu step must then clip ``D / p`` at 0 as the reference
    does (without the clip the CUDA body took ``sqrt`` of a negative number: NaN).
    Only agreement with the reference is checked here: the values themselves
    follow the rounding (the exact NNGP/NTK of such pairs at depth 1 is 0).
    """
    X0, _ = _data()
    X = np.vstack([a * X0 for a in (0.3, 1.0, 7.0)])
    Y = np.vstack([-b * X0 for b in (0.7, 1.0, 1.3, 2.0, 2.9)])
    spec = KernelSpec("ntk" if want_ntk else "nngp", (depth, "relu", 2.0, 0.0))
    ctx = REFERENCE._prepare(spec, X, Y)
    G = ctx["X"] @ ctx["Y"].T
    args = (ctx["sx"], ctx["sy"], depth, 0, 2.0, 0.0, 1.0 / X.shape[1], want_ntk, -1, False,
            ctx["X"], ctx["Y"])
    ref = G.copy()
    REFERENCE._nn(ref, ref, *args)
    got = G.copy()
    gpu._nn(got, got, *args)
    _check(got, ref)


END_TO_END = [KernelSpec("rbf", (0.3,)), KernelSpec("matern", (0.3, 1.5)),
              KernelSpec("ntk", (3, "relu", 2.0, 0.25)), KernelSpec("nngp", (2, "erf", 1.0, 0.0))]


@pytest.mark.parametrize("spec", END_TO_END, ids=lambda s: f"{s.name}-{s.params}")
def test_gpu_code_path_end_to_end(gpu, spec):
    """The whole engine on its GPU path (several row blocks, float32 output) vs NumPy."""
    X, Y = _data()
    W = np.random.default_rng(7).standard_normal((9, 2))
    with kernelkit.config_context(working_memory=3 * 13 * 8 / 2**20):  # 3-row blocks
        for args in ((X, Y), (X, None)):
            ref = REFERENCE.pairwise(spec, *args)
            _check(gpu.pairwise(spec, *args), ref)
            got32 = gpu.pairwise(spec, *[None if a is None else a.astype(np.float32)
                                         for a in args])
            ref32 = REFERENCE.pairwise(spec, *[None if a is None else a.astype(np.float32)
                                               for a in args])
            assert got32.dtype == np.float32
            assert_allclose(got32, ref32, rtol=1e-6, atol=1e-7 * np.abs(ref32).max())
            chunks = np.vstack([b for _, b in gpu.pairwise_chunked(spec, *args)])
            _check(chunks, ref)
        _check(gpu.matmul(spec, X, Y, W), REFERENCE.matmul(spec, X, Y, W))
