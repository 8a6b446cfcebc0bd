"""The cuda-raw variants on a real GPU: session-stream ordering, zero synchronizations, and
CuPy's state left as it was. (Values of every cuda variant against its reference run in
test_linalg_ops.py and test_linalg_contractions.py, whose ``cuda`` cases need a GPU too.)"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pytest
from tenferro_host_linalg import cupy_missing_reason, einsum_chain, tolerance

import tenferro_host as tf
from tenferro_host.benchmarks.kernels import AXPY_OP, DSL_OP, register_dsl_op

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

# One block: thread 0 spins for `ns` of the GPU's global timer, then all threads fill x with 1.
SPIN_FILL_SRC = r"""
extern "C" __global__ void spin_fill(float* x, int n, unsigned long long ns) {
    if (threadIdx.x == 0) {
        unsigned long long start, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 1.0f;
}
"""


@pytest.fixture(scope="module")
def host():
    return tf.Host()


@pytest.fixture
def rt(host):
    status = host.backend_status("cuda")
    if not status.available:
        pytest.skip(f"no CUDA device: {status.reason}")
    if cupy_missing_reason() is not None:
        pytest.skip(cupy_missing_reason())
    return host.backend("cuda")


def _rand(*shape, dtype=np.float32):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)


def test_contractions_in_a_session_never_synchronize(rt):
    a, b, c = _rand(64, 32), _rand(32, 48), _rand(48, 16)
    x = _rand(8, 6, 4)
    ta, tb, tc, tx = (rt.upload(v) for v in (a, b, c, x))
    rt.synchronize()
    before = rt.stats()
    with rt.session() as s:
        ex = s.exec_session()
        mm = ex.run("linalg.matmul", ta, tb)
        mm_view = ex.run("linalg.matmul", tb.T, ta.T)  # non-compact: canonicalized on device
        bmm = ex.run("linalg.batched_matmul", tx, tx.permute(1, 0, 2))
        td = ex.run("linalg.tensordot", ta, tb, axes=1)
        es = ex.run("linalg.einsum", ta, tb, spec="ij,jk->ki")
        chain = einsum_chain(ex, "ij,jk,kl->il", ta, tb, tc)
        sm = ex.run("linalg.sum", tx, axis=(0, 2))
        nm = ex.run("linalg.norm", ta)
    after = rt.stats()
    assert after["synchronizations"] == before["synchronizations"]
    assert after["downloads"] == before["downloads"] and after["uploads"] == before["uploads"]
    assert after["d2d_copies"] > before["d2d_copies"]  # the views' canonicalizations
    tol = tolerance("linalg.matmul", "float32")
    for got, want in [
        (mm, a @ b),
        (mm_view, b.T @ a.T),
        (bmm, np.einsum("ijb,jkb->ikb", x, x.transpose(1, 0, 2))),
        (td, np.tensordot(a, b, 1)),
        (es, (a @ b).T),
        (chain, a @ b @ c),
        (sm, x.sum(axis=(0, 2))),
        (nm, np.linalg.norm(a)),
    ]:
        np.testing.assert_allclose(got.download(), want, rtol=tol[0], atol=tol[1])


@pytest.mark.parametrize("op", ["linalg.matmul", "linalg.sum", "linalg.qr"])
def test_vendor_calls_are_ordered_on_the_session_stream(rt, op):
    """A kernel still spinning on the session's stream writes the input: an op enqueued on any
    other stream (CuPy's default one included) would read the zeros that were there before."""
    n = 32
    x = rt.zeros(tf.float32, (n, n))
    with rt.session() as s:
        ex = s.exec_session()
        with ex.raw("tests.linalg.spin") as rs:
            module = rs.compile_nvrtc(SPIN_FILL_SRC)
            rs.launch(
                module.function("spin_fill"),
                tf.cuda.raw.LaunchConfig(1, 256),
                [rs.tensor_mut(x), tf.cuda.raw.i32(n * n), tf.cuda.raw.u64(200_000_000)],
            )
        result = ex.run(op, x, x) if op == "linalg.matmul" else ex.run(op, x)
    ones = np.ones((n, n), np.float32)
    if op == "linalg.matmul":
        np.testing.assert_allclose(result.download(), ones @ ones)
    elif op == "linalg.sum":
        assert result.download() == n * n
    else:
        q, r = (t.download() for t in result)
        np.testing.assert_allclose(q @ r, ones, atol=1e-4)


def test_cupy_current_stream_and_device_are_restored(rt):
    import cupy

    before = cupy.cuda.get_current_stream().ptr
    t = rt.upload(_rand(4, 4))
    rt.host.run("linalg.matmul", t, t)
    rt.host.run("linalg.svd", t)
    assert cupy.cuda.get_current_stream().ptr == before


def test_each_runtime_uses_its_own_stream(rt):
    other = rt.host.new_backend("cuda")
    a = _rand(16, 16, dtype=np.float64)
    for runtime in (rt, other):
        t = runtime.upload(a)
        got = runtime.host.run("linalg.matmul", t, t.T)
        np.testing.assert_allclose(got.download(), a @ a.T, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "complex64", "complex128"])
def test_gemm_dtypes_with_rectangular_batches(rt, dtype):
    np_dtype = np.dtype(dtype)
    a = _rand(33, 17, 3).astype(np_dtype)
    b = _rand(17, 9, 3).astype(np_dtype)
    if np_dtype.kind == "c":
        a, b = (a * (1 - 2j)).astype(np_dtype), (b * (2 + 1j)).astype(np_dtype)
    got = rt.host.run("linalg.batched_matmul", rt.upload(a), rt.upload(b)).download()
    want = np.einsum("ijb,jkb->ikb", a.astype(np.complex128), b.astype(np.complex128))
    rtol, atol = tolerance("linalg.batched_matmul", dtype)
    np.testing.assert_allclose(got, want.astype(np_dtype), rtol=rtol, atol=atol * 10)


@pytest.mark.parametrize("form", ["native", "replayed"])
def test_a_capture_of_a_cublas_matmul_and_dsl_ops(rt, host, form, monkeypatch):
    """A solver's step: a cuBLAS GEMM (through CuPy on the session stream) then two DSL ops.
    CuPy refuses cuBLAS calls during a stream capture (NotImplementedError, found on the H100),
    so the native form refuses the GEMM's call, typed, naming the replayed form; the replayed
    form captures the step and replays what the same calls give eager."""
    monkeypatch.setenv("TENFERRO_CUDA_GRAPHS", form)
    register_dsl_op(host)
    a, b = _rand(64, 32), _rand(32, 48)
    ta, tb = rt.upload(a), rt.upload(b)
    m = host.run("linalg.matmul", ta, tb)  # the warm-up: cuBLAS's handle, the DSL kernels
    host.run(AXPY_OP, host.run(DSL_OP, m, m), m, a=0.5)
    refused = pytest.raises(tf.CaptureError, match="CuPy work on the session stream")
    with rt.session() as s:
        ex = s.exec_session()
        with refused if form == "native" else nullcontext() as info, ex.capture() as cap:
            m = ex.run("linalg.matmul", ta, tb)
            out = ex.run(AXPY_OP, ex.run(DSL_OP, m, m), m, a=0.5)
    if form == "native":
        assert info.value.op == "linalg.matmul"
        assert "TENFERRO_CUDA_GRAPHS=replayed" in info.value.fix
        return
    graph = cap.graph(inputs=(ta, tb), outputs=(out,))
    assert graph.form == "replayed"
    tol = tolerance("linalg.matmul", "float32")
    for seed in range(3):
        x, y = _rand(64, 32) + seed, _rand(32, 48) - seed
        want = 2 * (x @ y)  # 0.5 * (m + m) + m
        got = graph.replay(rt.upload(x), rt.upload(y)).download()
        np.testing.assert_allclose(got, want, rtol=tol[0], atol=tol[1] * 10)
