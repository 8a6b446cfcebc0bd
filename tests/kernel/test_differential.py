"""Differential test: seeded random kernels (:mod:`dsl_fuzz`) on every available target against
the CPU interpreter, the reference; every generated kernel also compiles to an sm_90 CUBIN with
NVRTC (no GPU needed).

CI runs ``TENFERRO_DIFF_KERNELS`` kernels (default 180) from seed ``TENFERRO_DIFF_SEED``
(default 2026), in test items of :data:`CHUNK` kernels (fragments: :data:`FRAGMENT_CHUNK`); a
GPU run sets more, e.g. ``TENFERRO_DIFF_KERNELS=1000``. Each failure names the kernel, the target
and the first differing thread, and writes the generated module to the pytest temporary directory
so it can be run again.

What must match, per generated kernel (``docs/dsl-guide.md``, "Numeric rules"):

* ``io`` (ints), ``bo`` (bools), ``fo`` (floats from correctly rounded operations,
  comparisons, casts, control flow) and ``vo`` (what ``K.store4`` wrote of ``K.load4``'s
  values): identical (NaN = NaN, 0 = -0); a subnormal expected
  value may read as zero on WebGPU (WGSL lets implementations flush subnormals);
* ``fa`` (one of ``/ sqrt exp log sin cos tanh ** fma`` applied last): within the target's
  tolerance for that operation, :data:`TOLERANCES`.

Input ``y`` is a strided 1-D view (``dsl_fuzz.STRIDED``), so every target's linear ``y[i]``
must follow the stride (a read of raw storage gives other values).

Matrix fragments have kernels of their own (:mod:`fragment_fuzz`, ``TENFERRO_DIFF_FRAGMENT_
KERNELS``, default 24): random f16 tile products of every fragment shape with f32 accumulation
of small integers, exact in any summation order, so numpy, the interpreter, WebGPU and CUDA's
tensor cores must agree bit for bit, and each kernel compiles to an sm_90 CUBIN.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import dsl_fuzz, fragment_fuzz
from support.nvrtc_compile import compile_sm90

import tenferro_host as tf
from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host._cpu._interpreter import ArrayArg, run

COUNT = int(os.environ.get("TENFERRO_DIFF_KERNELS", "180"))
FRAGMENT_COUNT = int(os.environ.get("TENFERRO_DIFF_FRAGMENT_KERNELS", "24"))
SEED = int(os.environ.get("TENFERRO_DIFF_SEED", "2026"))
OUTPUTS = ("fo", "io", "bo", "fa", "vo")
CHUNK = 60
"""Kernels per test item: each item stays well inside a per-test timeout (the GPU runner's is
120 s), however many kernels a run asks for."""
FRAGMENT_CHUNK = 6
"""Fragment kernels per test item: llvmpipe takes seconds for each (24 in one item timed out
at 300 s on a loaded 2-core machine)."""


def _chunks(count: int, size: int) -> range:
    """The test items' indices for ``count`` kernels, ``size`` per item."""
    return range(-(-count // size))


def _chunk(items: list[Any], k: int, size: int = CHUNK) -> list[tuple[int, Any]]:
    """Item ``k``'s share of ``items``, each with its index (its input seed)."""
    return list(enumerate(items))[k * size : (k + 1) * size]


#: (target, float type) -> rtol, atol for ``fa`` per approximate operation. WGSL leaves ``/`` at
#: 2.5 ulp, ``sqrt`` and the transcendental functions to the implementation, and ``fma`` may not
#: fuse (two roundings); CUDA's libdevice functions are within a few ulp.
TOLERANCES: dict[tuple[str, str], dict[str, tuple[float, float]]] = {
    ("webgpu", "f32"): {
        "div": (1e-6, 0),
        "sqrt": (1e-6, 0),
        "exp": (2e-5, 0),
        "log": (1e-5, 1e-6),
        "sin": (1e-4, 1e-4),
        "cos": (1e-4, 1e-4),
        "tanh": (1e-3, 1e-4),
        "pow": (1e-4, 1e-30),
        "fma": (1e-6, 1e-6),
    },
    ("webgpu", "f16"): {op: (4e-3, 4e-3) for op in dsl_fuzz.APPROX},
    ("cuda", "f32"): {op: (2e-6, 1e-7) for op in dsl_fuzz.APPROX},
    ("cuda", "f16"): {op: (2e-3, 1e-3) for op in dsl_fuzz.APPROX},
    ("cuda", "f64"): {op: (1e-14, 1e-300) for op in dsl_fuzz.APPROX},
}


def _import(path: Path, source: str) -> Any:
    """The generated module ``source``, written to ``path`` (kernel source must live in a file)."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory):
    source, kernels = dsl_fuzz.generate(SEED, COUNT)
    path = tmp_path_factory.mktemp("dsl_fuzz") / f"generated_kernels_{SEED}_{COUNT}.py"
    return _import(path, source), kernels, path


@pytest.fixture(scope="module")
def fragments(tmp_path_factory: pytest.TempPathFactory):
    source, kernels = fragment_fuzz.generate(SEED, FRAGMENT_COUNT)
    path = tmp_path_factory.mktemp("fragment_fuzz") / f"fragment_kernels_{SEED}.py"
    return _import(path, source), kernels, path


def _descs(args: dict[str, Any]) -> list[Any]:
    return [
        K.ArrayDesc(dtypes.dtype(v.dtype), 1, k not in dsl_fuzz.STRIDED)
        if isinstance(v, np.ndarray)
        else K.ScalarDesc(dtypes.dtype(v.dtype))
        for k, v in args.items()
    ]


def _view(name: str, storage: np.ndarray) -> ArrayArg:
    step = dsl_fuzz.STRIDED.get(name, 1)
    return ArrayArg(storage, 0, (storage.size // step,), (step,))


def on_interpreter(kernel: K.Kernel, args: dict[str, Any]) -> dict[str, np.ndarray]:
    copies = {k: v.copy() for k, v in args.items()}
    converted = [_view(k, v) if isinstance(v, np.ndarray) else v for k, v in copies.items()]
    spec = kernel.specialize(_descs(args), {}, "cpu")
    run(spec, (2, 1, 1), (dsl_fuzz.THREADS // 2, 1, 1), converted)
    return {k: copies[k] for k in OUTPUTS}


def on_runtime(
    rt: Any, jit: Callable[[], Any], kernel: K.Kernel, args: dict[str, Any]
) -> dict[str, np.ndarray]:
    tensors = {k: rt.upload(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    views = [t[:: dsl_fuzz.STRIDED[k]] if k in dsl_fuzz.STRIDED else t for k, t in tensors.items()]
    with jit() as js:
        js.launch(kernel, 2, dsl_fuzz.THREADS // 2, *views)
    return {k: tensors[k].download() for k in OUTPUTS}


def mismatch(
    name: str, op: str, target: str, ftype: str, expected: np.ndarray, got: np.ndarray
) -> str | None:
    """Where ``got`` breaks the rule for output ``name``, or None."""
    if name in ("io", "bo"):
        bad = expected != got
    elif name in ("fo", "vo"):
        e, g = expected.astype(np.float64), got.astype(np.float64)
        same = (e == g) | (np.isnan(e) & np.isnan(g))
        tiny = float(np.finfo(expected.dtype).tiny)
        flushed = (target == "webgpu") & (np.abs(e) < tiny) & (g == 0)
        bad = ~(same | flushed)
    else:
        rtol, atol = TOLERANCES[(target, ftype)][op]
        e, g = expected.astype(np.float64), got.astype(np.float64)
        bad = ~np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return None
    t = int(np.flatnonzero(bad)[0])
    return (
        f"{name}[{t}]: expected {expected[t]!r}, got {got[t]!r} "
        f"({int(bad.sum())} of {bad.size} threads differ)"
    )


def _targets() -> list[Any]:
    return [
        pytest.param("webgpu", marks=pytest.mark.webgpu, id="webgpu"),
        pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.cuda], id="cuda"),
    ]


@functools.cache
def _host() -> tf.Host:
    """One host for the module: each test item reuses its runtimes (a CUDA context each)."""
    return tf.Host()


def _target(name: str) -> tuple[Any, Callable[[], Any], set[str]]:
    """The runtime, a JIT-session factory and the float types the target runs."""
    host = _host()
    status = host.backend_status(name)
    if not status.available:
        pytest.skip(f"no {name} device: {status.reason}")
    rt = host.backend(name)
    module = getattr(tf, name)

    @contextmanager
    def jit() -> Iterator[Any]:
        with rt.session() as s, module.exec_session(s).jit("tests.differential") as js:
            yield js

    if name == "webgpu":
        floats = {"f32"} | ({"f16"} if rt.device_info.shader_f16 else set())
        return rt, jit, floats
    return rt, jit, {"f32", "f16", "f64"}


def _runs_on(target: str, floats: set[str], profile: dsl_fuzz.Profile) -> bool:
    if target == "webgpu" and profile.int_type == "i64":
        return False
    return profile.float_type in floats


@pytest.mark.parametrize("chunk", _chunks(COUNT, CHUNK))
@pytest.mark.parametrize("target", _targets())
def test_generated_kernels_agree_with_the_interpreter(target, chunk, generated):
    module, kernels, path = generated
    rt, jit, floats = _target(target)
    failures, ran = [], 0
    for n, gk in _chunk(kernels, chunk):
        if not _runs_on(target, floats, gk.profile):
            continue
        kernel = getattr(module, gk.name)
        args = dsl_fuzz.inputs(SEED + n, gk.profile)
        expected = on_interpreter(kernel, args)
        got = on_runtime(rt, jit, kernel, args)
        ran += 1
        for name in OUTPUTS:
            problem = mismatch(
                name, gk.approx, target, gk.profile.float_type, expected[name], got[name]
            )
            if problem:
                failures.append(f"{gk.name} ({gk.profile}, fa={gk.approx}): {problem}")
    print(
        f"differential: {ran} of kernels {chunk * CHUNK}..{chunk * CHUNK + CHUNK - 1} x {target} "
        f"(seed {SEED}), {len(failures)} mismatching; kernels in {path}"
    )
    assert ran > 0
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("chunk", _chunks(COUNT, CHUNK))
def test_generated_kernels_compile_for_sm90(chunk, generated):
    module, kernels, _path = generated
    from tenferro_host_cuda_jit._codegen import generate

    compiled = 0
    for n, gk in _chunk(kernels, chunk):
        args = dsl_fuzz.inputs(SEED + n, gk.profile)
        spec = getattr(module, gk.name).specialize(_descs(args), {}, "cuda", ("sm_90",))
        assert compile_sm90(generate(spec).source) > 0, gk.name
        compiled += 1
    print(f"differential: {compiled} kernels compiled to sm_90 CUBIN with NVRTC")


# ------------------------------------------------------------ matrix fragments


def _fragment_run(
    kernel: K.Kernel, args: dict[str, np.ndarray], rt: Any = None, jit: Any = None
) -> np.ndarray:
    """``d`` after one launch on the interpreter (``rt`` None) or on ``rt``."""
    if rt is None:
        copies = {k: v.copy() for k, v in args.items()}
        descs = [K.ArrayDesc(dtypes.dtype(v.dtype), 1) for v in copies.values()]
        arrays = [ArrayArg(v, 0, (v.size,), (1,)) for v in copies.values()]
        grid = (fragment_fuzz.CUBES, 1, 1), (fragment_fuzz.CUBE, 1, 1)
        run(kernel.specialize(descs, {}, "cpu"), *grid, arrays)
        return copies["d"]
    tensors = [rt.upload(v) for v in args.values()]
    with jit() as js:
        js.launch(kernel, fragment_fuzz.CUBES, fragment_fuzz.CUBE, *tensors)
    return np.asarray(tensors[0].download())


def _fragment_failure(fk: Any, where: str, expected: np.ndarray, got: np.ndarray) -> str | None:
    bad = np.flatnonzero(expected != got)
    if not bad.size:
        return None
    t = int(bad[0])
    return f"{fk.name} ({fk}) on {where}: d[{t}] expected {expected[t]!r}, got {got[t]!r}"


@pytest.mark.parametrize("chunk", _chunks(FRAGMENT_COUNT, FRAGMENT_CHUNK))
@pytest.mark.parametrize("target", ["interpreter", *_targets()])
def test_fragment_kernels_agree_with_numpy_bit_for_bit(target, chunk, fragments):
    """Random fragment tile products of small integers (every partial sum exact): the
    interpreter, WebGPU and CUDA give numpy's bits, the sentinel outside the stored tiles
    included."""
    module, kernels, path = fragments
    rt, jit, _ = _target(target) if target != "interpreter" else (None, None, None)
    failures = []
    mine = _chunk(kernels, chunk, FRAGMENT_CHUNK)
    for n, fk in mine:
        args = fragment_fuzz.inputs(SEED + n, fk)
        got = _fragment_run(getattr(module, fk.name), args, rt, jit)
        problem = _fragment_failure(fk, target, fragment_fuzz.expected(fk, args), got)
        if problem:
            failures.append(problem)
    print(f"differential: {len(mine)} fragment kernels x {target} (seed {SEED}) in {path}")
    assert mine and not failures, "\n".join(failures[:10])


def test_fragment_kernels_compile_for_sm90(fragments):
    module, kernels, _path = fragments
    from tenferro_host_cuda_jit._codegen import generate

    for n, fk in enumerate(kernels):
        args = fragment_fuzz.inputs(SEED + n, fk)
        descs = [K.ArrayDesc(dtypes.dtype(v.dtype), 1) for v in args.values()]
        spec = getattr(module, fk.name).specialize(descs, {}, "cuda", ("sm_90",))
        assert compile_sm90(generate(spec).source) > 0, fk.name
