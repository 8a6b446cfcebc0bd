"""WebGPU sessions: capabilities, the JIT session's batching, typed errors of WebGPU's own (the
rules every backend's sessions and launches keep: tests/provider/test_session_rules.py and
test_jit_launch_rules.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import kernels
from support import wgpu_kernels as wk
from tenferro_host_webgpu._wgsl import _shader as wgsl

import tenferro_host as tf
from tenferro_host.errors import (
    CompileError,
    ForeignRuntimeError,
    InvalidLaunchConfigError,
    UnsupportedError,
)

Cap = tf.ExtensionCapability


def test_capabilities_are_honest(rt: Any) -> None:
    with rt.session() as s:
        ex = tf.webgpu.exec_session(s)
        assert ex is not None and tf.cuda.exec_session(s) is None
        assert ex.supports(Cap.JIT_KERNEL)
        for cap in (
            Cap.NATIVE_MODULE,
            Cap.RUNTIME_COMPILATION,
            Cap.RAW_STREAM,
            Cap.PEER_COPY,
            Cap.SAME_DEVICE_ASYNC_COPY,
        ):
            assert not ex.supports(cap)
        assert ex.device_info is rt.device_info and ex.allocation_domain == rt.domain


def test_dispatches_are_one_batch_submitted_at_exit(rt: Any) -> None:
    n = 1000
    x = rt.upload(np.arange(n, dtype=np.float32))
    y = rt.upload(np.ones(n, np.float32))
    submitted = rt.queue.submissions
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.batch") as js:
        out = js.alloc_output("float32", (n,))
        for _ in range(5):
            js.launch(kernels.saxpy, js.cube_count_1d(n), js.cube_dim_1d(), out, x, y, 2.0)
        assert rt.queue.pending and rt.queue.submissions == submitted
    assert not rt.queue.pending and rt.queue.submissions == submitted + 1
    np.testing.assert_array_equal(out.download(), 2 * np.arange(n) + 1)


def test_a_download_inside_the_session_flushes_the_pending_batch(rt: Any) -> None:
    x = rt.upload(np.arange(10, dtype=np.float32))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.flush") as js:
        out = js.alloc_output("float32", (10,))
        js.launch(kernels.add, 1, 16, out, x, x)
        np.testing.assert_array_equal(out.download(), 2 * np.arange(10))
        js.launch(kernels.add, 1, 16, out, out, x)
    np.testing.assert_array_equal(out.download(), 3 * np.arange(10))


def test_no_implicit_transfer(rt: Any) -> None:
    x = rt.upload(np.arange(64, dtype=np.float32).reshape(8, 8))
    before = rt.stats()
    start = rt.transfer_trace()[-1]
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.trace") as js:
        out = js.alloc_output("float32", (8, 8))
        js.launch(kernels.transpose_2d, 1, 64, out, x.T)  # a non-compact view: no copy
        sums = js.alloc_output("float32", (8,))
        js.launch(kernels.row_sums, 1, 8, sums, js.binding(x))
    after = rt.stats()
    for key in ("uploads", "downloads", "d2d_copies", "peer_copies", "synchronizations"):
        assert after[key] == before[key], key
    assert rt.transfer_trace()[-1] is start


def test_a_launch_with_no_work_is_skipped(rt: Any) -> None:
    empty = rt.empty("float32", (0,))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.empty") as js:
        js.launch(kernels.add, js.cube_count_1d(0), js.cube_dim_1d(), empty, empty, empty)
        js.launch(kernels.add, (4, 0, 1), 32, empty, empty, empty)
        assert not rt.queue.pending


def test_empty_arrays_next_to_work_bind_a_placeholder(rt: Any) -> None:
    empty = rt.empty("float32", (0,))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.empty") as js:
        js.launch(kernels.add, 1, 32, empty, empty, empty)  # threads run, none passes the guard
    assert empty.download().shape == (0,)


# -- handles ---------------------------------------------------------------------------------------


def test_host_data_must_be_uploaded_first(webgpu_host: Any, rt: Any) -> None:
    cpu = webgpu_host.backend("cpu").upload(np.ones(4, np.float32))
    mine = rt.upload(np.ones(4, np.float32))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.host") as js:
        with pytest.raises(ForeignRuntimeError, match="upload"):
            js.binding(cpu)
        with pytest.raises(ForeignRuntimeError, match="upload"):
            js.launch(kernels.add, 1, 4, mine, cpu, mine)


# -- typed launch errors ---------------------------------------------------------------------------


def test_a_grid_that_does_not_fit_even_folded_is_refused(fresh_rt: Any) -> None:
    fresh_rt.max_workgroups_per_dimension = 2
    x = fresh_rt.upload(np.ones(4, np.float32))
    with fresh_rt.session() as s, tf.webgpu.exec_session(s).jit("tests.fold") as js:
        with pytest.raises(InvalidLaunchConfigError, match="folded"):
            js.launch(kernels.add, 9, 1, x, x, x)
        js.launch(kernels.add, 8, 1, x, x, x)  # 2 x 2 x 2 fits


@pytest.mark.parametrize("value", [0, -1, 10**6, 2.0])
def test_the_fold_limit_hook_is_validated(fresh_rt: Any, value: Any) -> None:
    with pytest.raises(InvalidLaunchConfigError):
        fresh_rt.max_workgroups_per_dimension = value


def test_f64_parameters_are_never_requested(rt: Any) -> None:
    out = rt.zeros("float32", (4,))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.f64") as js:
        with pytest.raises(UnsupportedError) as info:
            js.launch(wk.f64_scalar, 1, 4, out, 1.0)
    assert info.value.feature == "shader-f64"


def test_i64_inside_an_expression_is_never_requested(rt: Any) -> None:
    x = rt.upload(np.ones(4, np.float32))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.i64") as js:
        with pytest.raises(UnsupportedError) as info:
            js.launch(wk.inline_i64, 1, 4, x, x)
    assert info.value.feature == "shader-int64"


def test_f16_kernels_need_shader_f16(webgpu_host: Any) -> None:
    from test_runtime import without_shader_f16

    rt = without_shader_f16(webgpu_host)
    x = rt.upload(np.ones(4, np.float32))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.f16") as js:
        with pytest.raises(UnsupportedError) as info:
            js.launch(wk.copy_f16, 1, 4, x, x, np.float16(1))
    assert info.value.feature == "shader-f16"


def test_constant_expressions_run_like_on_cpu(rt: Any) -> None:
    """WGSL rejects an overflowing constant expression at shader creation; the generator hides
    constants from it, so the result overflows to inf as on every target."""
    out = rt.zeros("float32", (4,))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.compile") as js:
        js.launch(wk.constant_overflow, 1, 4, out)
    assert out.download().tolist() == [np.inf] * 4


def test_wgsl_errors_are_compile_errors_with_both_locations(
    webgpu_host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a generator that hands WGSL the constant expression as is: a compile error, located
    monkeypatch.setattr(wgsl._Emitter, "opaque", lambda self, code, dt, alt=0: code)
    # the persistent cache keys the generator by its files: a patch in memory is not in the key
    monkeypatch.setenv("TENFERRO_CACHE", "off")
    rt = webgpu_host.new_backend("webgpu")  # its own pipeline cache
    out = rt.zeros("float32", (4,))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.compile") as js:
        with pytest.raises(CompileError) as info:
            js.launch(wk.constant_overflow, 1, 4, out)
    err = info.value
    assert err.line is not None and err.column is not None
    generated = err.log.split("--- generated WGSL ---\n", 1)[1].splitlines()[err.line - 1]
    assert "e+38f" in generated and "10.0f" in generated
    source = wk.constant_overflow.parsed.filename
    line = next(
        i
        for i, text in enumerate(Path(source).read_text().splitlines(), 1)
        if "K.f32(3e38) * K.f32(10.0)" in text
    )
    assert f"{source}:{line}" in str(err) and err.op == "tests.compile"


def test_debug_sync_waits_after_each_launch(
    webgpu_host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENFERRO_DEBUG_SYNC", "1")
    rt = webgpu_host.new_backend("webgpu")
    x = rt.upload(np.ones(4, np.float32))
    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.debug") as js:
        js.launch(kernels.add, 1, 4, x, x, x)
        js.launch(kernels.add, 1, 4, x, x, x)
        assert not rt.queue.pending
    assert rt.stats()["debug_waits"] == 2
    np.testing.assert_array_equal(x.download(), [4, 4, 4, 4])


def test_freeing_a_tensor_with_pending_work_is_safe(rt: Any) -> None:
    import gc

    with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.free") as js:
        out = js.alloc_output("float32", (300,))
        tmp = rt.upload(np.full(300, 2.0, np.float32))
        js.launch(kernels.add, 2, 256, out, tmp, tmp)
        del tmp
        gc.collect()
    np.testing.assert_array_equal(out.download(), np.full(300, 4.0))


def test_sessions_on_two_threads_share_the_runtime_queue(rt: Any) -> None:
    results: dict[int, np.ndarray] = {}

    def work(k: int) -> None:
        x = rt.upload(np.full(5000, float(k), np.float32))
        with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.threads") as js:
            out = js.alloc_output("float32", (5000,))
            for _ in range(3):
                js.launch(kernels.add, js.cube_count_1d(5000), js.cube_dim_1d(), out, x, x)
        results[k] = out.download()

    threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in (1, 2, 3):
        np.testing.assert_array_equal(results[k], np.full(5000, 2.0 * k))
