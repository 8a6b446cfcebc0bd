"""Faults and limits lose nothing: out of memory, Ctrl-C in a launch loop or a download.

After each fault the runtime must keep working: a tensor made before it downloads intact, a
new session launches and computes right. Ctrl-C is ``_thread.interrupt_main()`` from a timer
thread, which raises KeyboardInterrupt wherever the main thread is (inside the host's session
code too). The loops run until it arrives, so it never lands outside the test — or until two
seconds after it was sent: when it lands in an object's ``__del__`` (a wgpu buffer released
during a download, say), CPython prints and drops it, as it drops every exception there.
"""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from support.backends import available_host, kind_params

import tenferro_host as tf
from tenferro_host.benchmarks.kernels import fill

BACKENDS = kind_params("cpu", "webgpu", "cuda")


def runtime(kind: str) -> tf.Runtime:
    """A runtime of its own: faults here touch no other test."""
    return available_host(kind).new_backend(kind)


def still_works(rt: tf.Runtime, kept: tf.Tensor, expected: np.ndarray) -> None:
    np.testing.assert_array_equal(kept.download(), expected)
    out = rt.zeros("float32", (1000,))
    with rt.session() as s, s.exec_session().jit("faults.after") as js:
        js.launch(fill, js.cube_count_1d(1000), js.cube_dim_1d(), out, 4.5)
    assert (out.download() == 4.5).all()


def until_ctrl_c(step: Callable[[], None], after: float = 0.2) -> tuple[int, bool]:
    """Run ``step`` until Ctrl-C (sent after ``after`` s) stops it: (steps run, whether it
    landed).

    Two seconds after it was sent without landing, it was dropped in some ``__del__``.
    """
    timer = threading.Timer(after, _thread.interrupt_main)
    steps, deadline = 0, None
    try:
        timer.start()
        while deadline is None or time.monotonic() < deadline:
            step()
            steps += 1
            if deadline is None and not timer.is_alive():
                deadline = time.monotonic() + 2.0
    except KeyboardInterrupt:
        return steps, True
    finally:
        timer.join()
    return steps, False


@pytest.mark.parametrize("kind", BACKENDS)
def test_ctrl_c_in_a_launch_loop_leaves_the_runtime_usable(kind):
    rt = runtime(kind)
    x = np.arange(4096, dtype=np.float32)
    kept = rt.upload(x)
    out = rt.zeros("float32", (4096,))
    still_works(rt, kept, x)  # compiles the fill first: the loop then only launches

    def session_of_launches() -> None:
        with rt.session() as s, s.exec_session().jit("faults.loop") as js:
            for _ in range(20):
                js.launch(fill, js.cube_count_1d(4096), js.cube_dim_1d(), out, 1.0)

    started = time.monotonic()
    session_of_launches()  # one whole session before the timer: the loop then only repeats it
    took = time.monotonic() - started
    # Ctrl-C after a few sessions' time, however slow this adapter's sessions are (the H200's
    # Vulkan adapter once interrupted the first session at 0.2 s: steps == 0).
    steps, _ = until_ctrl_c(session_of_launches, after=max(0.2, 3 * took))
    assert steps > 0
    still_works(rt, kept, x)


@pytest.mark.parametrize("kind", BACKENDS)
def test_ctrl_c_in_a_download_loop_leaves_the_runtime_usable(kind):
    rt = runtime(kind)
    x = np.arange(1 << 20, dtype=np.float32)
    kept = rt.upload(x)
    steps, _ = until_ctrl_c(lambda: np.testing.assert_array_equal(kept.download(), x))
    assert steps > 0
    still_works(rt, kept, x)


def test_cpu_out_of_memory_keeps_earlier_tensors():
    rt = runtime("cpu")
    x = np.arange(100, dtype=np.float64)
    kept = rt.upload(x)
    with pytest.raises(tf.OutOfMemoryError) as info:
        rt.empty("float64", (2**61,))
    assert info.value.nbytes == 2**64
    still_works(rt, kept, x)


@pytest.mark.webgpu
def test_webgpu_tensor_beyond_its_buffer_limit_keeps_earlier_tensors():
    rt = runtime("webgpu")
    x = np.arange(100, dtype=np.float32)
    kept = rt.upload(x)
    with pytest.raises(tf.OutOfMemoryError) as info:  # an adapter limit: no device holds it
        rt.empty("float32", (rt.device_info.max_buffer_size // 4 + 1,))
    assert info.value.limit in ("max_buffer_size", "max_storage_buffer_binding_size")
    assert info.value.nbytes == rt.device_info.max_buffer_size // 4 * 4 + 4
    still_works(rt, kept, x)


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.gpu_alone
def test_cuda_filled_to_out_of_memory_keeps_earlier_tensors_and_recovers():
    rt = runtime("cuda")
    x = np.arange(1000, dtype=np.float32)
    kept = rt.upload(x)
    elements = rt.device_info.total_memory // 8 // 4
    chunk = elements * 4
    held = []
    with pytest.raises(tf.OutOfMemoryError) as info:
        for _ in range(16):  # 16 eighths of the device: the pool runs out on the way
            held.append(rt.empty(tf.uint32, (elements,)))
    assert info.value.nbytes == chunk and "used_current" in info.value.pool_stats
    assert len(held) >= 1
    held.clear()
    rt.synchronize()
    rt.trim()
    still_works(rt, kept, x)
    assert rt.pool_stats()["used_current"] < chunk
