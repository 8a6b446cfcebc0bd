"""The cuda-raw variants' glue, run without a GPU against a model of CuPy and cuBLAS.

The model keeps CuPy's and cuBLAS's contracts — ``cublas.gemmEx``/``gemmStridedBatchedEx``
read column-major operands from raw addresses with the given leading dimensions and batch
strides; CuPy routines act on arrays over a ref's memory; a call may only run while the
session's stream (``Stream.from_external``) is current — on host memory (CPU tensors stand
in for device ones). It checks what the GPU run cannot show cheaply: the GEMM arguments the
variants derive (sizes, leading dimensions, strides, dtypes, compute types), that every vendor
call happens on the session's stream, and the output bookkeeping of sum, norm, QR and SVD.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import types
from typing import ClassVar

import numpy as np
import pytest
from tenferro_host_linalg import cuda, cupy_bridge, reference, tolerance

import tenferro_host as tf
from tenferro_host.cpu import CpuRuntime

SESSION_STREAM = 0x5EED
TYPES = {"f16": 2, "f32": 0, "f64": 1, "c64": 4, "c128": 5}  # cudaDataType values
NUMPY = {2: np.float16, 0: np.float32, 1: np.float64, 4: np.complex64, 5: np.complex128}


def _matrix(ptr, dtype, rows, cols, ld):
    """A column-major (rows, cols) matrix with leading dimension ld at a host address."""
    itemsize = np.dtype(dtype).itemsize
    nbytes = (ld * (cols - 1) + rows) * itemsize
    flat = np.frombuffer((ctypes.c_char * nbytes).from_address(ptr), dtype=dtype)
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (itemsize, ld * itemsize))


class ModelStream:
    """CuPy 14's stream: ``from_external`` reads the CUDA stream protocol. The model has no
    ``ExternalStream`` (deprecated by CuPy 14), so a bridge calling it fails here."""

    model_state: ClassVar[dict] = {}

    def __init__(self, ptr):
        self.ptr = ptr

    @classmethod
    def from_external(cls, obj):
        version, handle = obj.__cuda_stream__()
        assert version == 0
        cls.model_state["wrapped"] = handle
        return cls(handle)


def fake_cupy():
    """numpy behind CuPy's names, plus the cuBLAS and stream parts the variants use."""
    state = {"stream": None, "calls": []}

    def on_session_stream(name):
        assert state["stream"] == SESSION_STREAM, f"{name} ran off the session's stream"
        state["calls"].append(name)

    def gemm_batched(
        handle,
        ta,
        tb,
        m,
        n,
        k,
        alpha,
        a,
        at,
        lda,
        sa,
        b,
        bt,
        ldb,
        sb,
        beta,
        c,
        ct,
        ldc,
        sc,
        count,
        compute,
        algo,
    ):
        on_session_stream("gemm")
        assert ta == tb == 0 and at == bt == ct and lda >= m and ldb >= k and ldc >= m
        assert compute == (70 if at in (1, 5) else 68) and algo == 99
        dt, size = NUMPY[at], np.dtype(NUMPY[at]).itemsize
        for p in range(count):
            A = _matrix(a + p * sa * size, dt, m, k, lda)
            B = _matrix(b + p * sb * size, dt, k, n, ldb)
            wide = np.float32 if dt == np.float16 else dt
            _matrix(c + p * sc * size, dt, m, n, ldc)[...] = A.astype(wide) @ B.astype(wide)

    def gemm(handle, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc, *how):
        """cublasGemmEx: gemm_batched's one product (no strides; ``how``: compute type, algo)."""
        a_operand, b_operand, c_operand = (a, at, lda, 0), (b, bt, ldb, 0), (c, ct, ldc, 0)
        gemm_batched(
            handle, ta, tb, m, n, k, alpha, *a_operand, *b_operand, beta, *c_operand, 1, *how
        )

    @contextlib.contextmanager
    def current(stream):
        saved, state["stream"] = state["stream"], stream
        try:
            yield
        finally:
            state["stream"] = saved

    class Stream(ModelStream):
        model_state = state

        def __enter__(self):
            self._ctx = current(self.ptr)
            self._ctx.__enter__()

        def __exit__(self, *exc):
            self._ctx.__exit__(*exc)

    def routine(name, fn):
        def call(*args, **kwargs):
            on_session_stream(name)
            return fn(*args, **kwargs)

        return call

    cupy = types.ModuleType("cupy")  # hashable, like the real module (gemm_type caches on it)
    for name in ("abs", "where", "conj", "argmax", "arange", "diagonal"):
        setattr(cupy, name, getattr(np, name))
    cupy.asarray = lambda ref: ref.array
    cupy.sum = routine("sum", np.sum)
    cupy.copyto = routine("copyto", np.copyto)
    cupy.linalg = types.SimpleNamespace(
        norm=routine("norm", np.linalg.norm),
        qr=routine("qr", np.linalg.qr),
        svd=routine("svd", np.linalg.svd),
    )
    cublas = types.SimpleNamespace(
        CUBLAS_OP_N=0,
        CUBLAS_COMPUTE_32F=68,
        CUBLAS_COMPUTE_64F=70,
        CUBLAS_GEMM_DEFAULT=-1,
        CUBLAS_GEMM_DEFAULT_TENSOR_OP=99,
        gemmEx=gemm,
        gemmStridedBatchedEx=gemm_batched,
    )
    runtime = types.SimpleNamespace(
        **{
            f"CUDA_{k}": v
            for k, v in zip(
                ("R_16F", "R_32F", "R_64F", "C_32F", "C_64F"), TYPES.values(), strict=True
            )
        }
    )
    device = types.SimpleNamespace(get_cublas_handle=lambda: 1)
    cupy.cuda = types.SimpleNamespace(
        cublas=cublas,
        runtime=runtime,
        device=device,
        Stream=Stream,
        Device=lambda i: contextlib.nullcontext(),
    )
    return cupy, state


class Ref:
    """A borrowed tensor: its address, and (for the CuPy model) a numpy view of it."""

    def __init__(self, t):
        self.array = CpuRuntime.strided_view(t)

    def data_ptr_unsafe(self):
        return self.array.__array_interface__["data"][0]


class RawSession:
    def __init__(self, ex):
        self.op, self.runtime, self._cache = "linalg.model", ex.model_runtime, {}
        self.stream = types.SimpleNamespace(native_handle_unsafe=lambda: SESSION_STREAM)
        self.alloc_output = ex.runtime.empty
        self.tensor = self.tensor_strided = self.tensor_mut = Ref

    def resource(self, key, init):
        return self._cache.setdefault(key, init())


class ExecSession:
    """A CUDA exec session as the variants see it, over the CPU runtime's memory."""

    def __init__(self, cpu):
        self.runtime = cpu
        info = types.SimpleNamespace(
            compute_capability=(9, 0), ordinal=types.SimpleNamespace(ordinal=0)
        )
        self.device_info = info
        self.model_runtime = types.SimpleNamespace(
            name="cuda:0", device_info=info, active_capture=None
        )

    @contextlib.contextmanager
    def raw(self, op):
        yield RawSession(self)


@pytest.fixture
def model(monkeypatch):
    cupy, state = fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    cupy_bridge.cupy_missing_reason.cache_clear()
    cuda.gemm_type.cache_clear()
    yield ExecSession(tf.Host().backend("cpu")), state
    cupy_bridge.cupy_missing_reason.cache_clear()
    cuda.gemm_type.cache_clear()


def _rand(shape, dtype):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if "complex" in dtype else 0)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "complex64", "complex128"])
def test_gemm_arguments_follow_column_major_cublas(model, dtype):
    ex, state = model
    cpu = ex.runtime
    a, b = _rand((5, 3), dtype), _rand((3, 4), dtype)
    rtol, atol = tolerance("linalg.matmul", dtype)
    got = cuda.matmul(ex, cpu.upload(a), cpu.upload(b))
    np.testing.assert_allclose(got.download(), reference.matmul(a, b), rtol=rtol, atol=atol)
    x, y = _rand((4, 3, 2, 3), dtype), _rand((3, 2, 2, 3), dtype)
    got = cuda.batched_matmul(ex, cpu.upload(x), cpu.upload(y))
    np.testing.assert_allclose(got.download(), reference.batched_matmul(x, y), rtol=rtol, atol=atol)
    assert state["calls"] == ["gemm", "gemm"] and state["stream"] is None


def test_non_compact_and_empty_gemm_operands(model):
    ex, state = model
    cpu = ex.runtime
    a = _rand((6, 5), "float64")
    view = cpu.upload(a).T[1:, ::2]  # (4, 3), non-compact: canonicalized before cuBLAS
    np.testing.assert_allclose(
        cuda.matmul(ex, view, view.T).download(), a.T[1:, ::2] @ a.T[1:, ::2].T, rtol=1e-12
    )
    empty = cuda.matmul(ex, cpu.upload(np.ones((3, 0))), cpu.upload(np.ones((0, 2))))
    assert (empty.download() == 0).all() and empty.shape == (3, 2)
    assert state["calls"] == ["gemm"]  # k == 0 fills zeros without cuBLAS


def test_reductions_and_factorizations_write_their_outputs(model):
    ex, state = model
    cpu = ex.runtime
    x = _rand((4, 3, 5), "float32")
    got = cuda.sum(ex, cpu.upload(x).permute(2, 0, 1), axis=(0, 2))
    np.testing.assert_allclose(got.download(), x.transpose(2, 0, 1).sum(axis=(0, 2)), rtol=1e-5)
    z = _rand((5, 3), "complex128")
    norm = cuda.norm(ex, cpu.upload(z))
    assert norm.dtype == tf.float64 and norm.shape == ()
    np.testing.assert_allclose(norm.download(), np.linalg.norm(z), rtol=1e-12)
    for got, want in zip(cuda.qr(ex, cpu.upload(z)), reference.qr(z), strict=True):
        np.testing.assert_allclose(got.download(), want, rtol=1e-12, atol=1e-12)
    for got, want in zip(cuda.svd(ex, cpu.upload(z.T)), reference.svd(z.T), strict=True):
        np.testing.assert_allclose(got.download(), want, rtol=1e-10, atol=1e-12)
    assert [c for c in state["calls"] if c != "copyto"] == ["sum", "norm", "qr", "svd"]
    assert state["stream"] is None


def test_session_stream_is_wrapped_with_stream_from_external(model):
    """CuPy 14 deprecates ``cupy.cuda.ExternalStream``: the bridge wraps the session's stream
    with ``Stream.from_external`` (the model has no ExternalStream, so the old call fails)."""
    ex, state = model
    cpu = ex.runtime
    x = _rand((3, 4), "float32")
    got = cuda.norm(ex, cpu.upload(x))
    assert state["wrapped"] == SESSION_STREAM
    np.testing.assert_allclose(got.download(), np.linalg.norm(x), rtol=1e-5)
