"""The CUDA path of the bridges: torch's and XLA's streams, no host waits, CUDA graphs.

Runs where the host has a CUDA device and torch / JAX are CUDA builds (the H200); skips with
the reason elsewhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_host as tf

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]


@pytest.fixture
def cuda_host(bridge_host: tf.Host) -> tf.Host:
    status = bridge_host.backend_status("cuda")
    if not status.available:
        pytest.skip(f"no CUDA device: {status.reason}")
    return bridge_host


def _torch_cuda() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch is not a CUDA build here")
    return torch


def _jax_cuda() -> Any:
    jax = pytest.importorskip("jax")
    try:
        jax.devices("cuda")
    except RuntimeError as exc:
        pytest.skip(f"JAX has no CUDA device: {exc}")
    return jax


def _syncs(host: tf.Host) -> int:
    return host.backend("cuda:0").stats().get("synchronizations", 0)


def test_torch_op_runs_in_order_on_a_side_stream_without_host_waits(cuda_host: tf.Host) -> None:
    torch = _torch_cuda()
    from tenferro_host.interop import torch as tf_torch

    add = tf_torch.export("ext_add_kernel.add")
    side = torch.cuda.Stream()
    n = 1 << 24
    with torch.cuda.stream(side):
        a = torch.full((n,), 1.0, device="cuda")  # queued on the side stream
        for _ in range(20):
            a.mul_(1.0)  # keep the side stream busy, so a missed ordering shows
        before = _syncs(cuda_host)
        out = add(a, a)
        after = _syncs(cuda_host)
        total = out.sum()  # torch reads the result on the same stream
    side.synchronize()
    assert after == before, "the op made the host wait"
    assert total.item() == 2.0 * n
    assert _in_torch_allocation(torch, out)  # the op wrote torch's own buffer: no copy


def _in_torch_allocation(torch: Any, t: Any) -> bool:
    """Whether ``t``'s storage lies in a segment of torch's caching allocator (a tensor wrapped
    from a buffer the host allocated would lie outside every one)."""
    ptr = t.untyped_storage().data_ptr()
    return any(
        seg["address"] <= ptr < seg["address"] + seg["total_size"]
        for seg in torch.cuda.memory_snapshot()
    )


def test_torch_calls_replay_the_ops_plan_on_torchs_buffers(cuda_host: tf.Host) -> None:
    """The CUDA kernel calls the op handle outside a session: a repeated call is planned and
    replays, writing a fresh torch buffer each time (no DLPack capsule, no session)."""
    torch = _torch_cuda()
    from tenferro_host.interop import torch as tf_torch

    add = tf_torch.export("ext_add_kernel.add")
    a = torch.arange(4096, device="cuda", dtype=torch.float32)
    outs = [add(a, a) for _ in range(4)]
    states = cuda_host.op("ext_add_kernel.add").plans()
    assert any(k.startswith("cuda:0(float32[4096]") and v == "replay" for k, v in states.items())
    for out in outs:
        torch.testing.assert_close(out, 2 * a)
        assert _in_torch_allocation(torch, out)
    assert len({o.data_ptr() for o in outs}) == len(outs)  # each its own live buffer


def test_a_torch_input_on_another_device_is_a_typed_error(cuda_host: tf.Host) -> None:
    torch = _torch_cuda()
    from tenferro_host.interop import torch as tf_torch

    add = tf_torch.export("ext_add_kernel.add")
    with pytest.raises(tf.ForeignRuntimeError, match="'rhs' lives on cpu"):
        add(torch.ones(8, device="cuda"), torch.ones(8))
    with pytest.raises(tf.ForeignRuntimeError, match="'lhs' lives on cpu"):
        add(torch.ones(8), torch.ones(8, device="cuda"))


def test_torch_opcheck_on_cuda(cuda_host: tf.Host) -> None:
    torch = _torch_cuda()
    from tenferro_host.interop import torch as tf_torch

    add = tf_torch.export("ext_add_kernel.add")
    a = torch.randn(1000, device="cuda")
    torch.library.opcheck(add.packet, (a, a))


def test_torch_compile_fullgraph(cuda_host: tf.Host) -> None:
    torch = _torch_cuda()
    from tenferro_host.interop import torch as tf_torch

    add = tf_torch.export("ext_add_kernel.add")

    def f(a: Any, b: Any) -> Any:
        return add(a, b) * 2

    full = torch.compile(f, fullgraph=True)
    for step in range(3):
        a = torch.full((1024,), float(step), device="cuda")
        torch.testing.assert_close(full(a, a), 4 * a)
    torch.cuda.synchronize()


def test_torch_compile_reduce_overhead_cuda_graphs(cuda_host: tf.Host) -> None:
    torch = _torch_cuda()
    from tenferro_host.interop import torch as tf_torch

    add = tf_torch.export("ext_add_kernel.add")

    def f(a: Any, b: Any) -> Any:
        return add(a, b) * 2

    graphed = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for step in range(4):  # warm-up, capture, then replays with new values
        a = torch.full((1024,), float(step), device="cuda")
        torch.testing.assert_close(graphed(a, a).clone(), 4 * a)
    assert any(pins.modules for pins in add.graph_pins), "the capture kept no module alive"
    # Evict every cached module: the graph's replays must still find the kernel loaded.
    runtime = cuda_host.backend("cuda:0")
    runtime.resources.clear()
    import gc

    gc.collect()
    runtime.synchronize()  # a drain point: an unpinned module would be unloaded here
    runtime.synchronize()  # and its retirement event passed
    for step in range(3):
        a = torch.full((1024,), float(step + 7), device="cuda")
        torch.testing.assert_close(graphed(a, a).clone(), 4 * a)
    torch.cuda.synchronize()


def test_jax_op_on_xla_stream(cuda_host: tf.Host) -> None:
    jax = _jax_cuda()
    from tenferro_host.interop import jax as tf_jax

    add = tf_jax.export("ext_add_kernel.add")
    device = jax.devices("cuda")[0]
    x = jax.device_put(np.arange(1 << 20, dtype=np.float32), device)
    before = _syncs(cuda_host)
    y = jax.jit(lambda v: add(v * 3, v))(x)
    np.testing.assert_array_equal(np.asarray(y), 4 * np.arange(1 << 20, dtype=np.float32))
    assert _syncs(cuda_host) == before
    m = jax.device_put(np.ones((4, 256), np.float32), device)
    np.testing.assert_array_equal(np.asarray(jax.vmap(add)(m, m)), 2 * np.ones((4, 256)))


def test_a_torch_cuda_graph_pins_the_modules_until_it_dies(cuda_host: tf.Host) -> None:
    torch = _torch_cuda()
    import gc
    import time

    from tenferro_host.interop import torch as tf_torch

    add = tf_torch.export("ext_add_kernel.add")
    a = torch.ones(1024, device="cuda")
    add(a, a)  # the warm-up outside the capture: the module is loaded
    before = add.graph_pins  # an earlier test's graph may still be dying: its pins are not ours
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = add(a, a)
    a.fill_(3.0)
    graph.replay()
    torch.testing.assert_close(out, torch.full_like(a, 6.0))
    (pin,) = [p for p in add.graph_pins if not any(p is q for q in before)]

    def pinned() -> bool:
        return any(p is pin for p in add.graph_pins)

    del graph
    gc.collect()
    torch.cuda.synchronize()
    # The driver runs the user object's destructor on its own thread once the graph and its
    # executable are destroyed; give it up to 10 s.
    deadline = time.monotonic() + 10
    while pinned() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not pinned(), "the dead graph's pins were not released"
    runtime = cuda_host.backend("cuda:0")
    runtime.synchronize()  # the drain point that lets them go
    assert not any(kind == "drop" for kind, _ in runtime.deferred)


def test_torch_gradients_on_cuda(cuda_host: tf.Host) -> None:
    """The declared backwards of add and matmul on CUDA tensors (their backward calls run the
    ops' CUDA variants on torch's buffers); an op without one raises, never a zero gradient."""
    torch = _torch_cuda()
    from tenferro_host.interop import torch as tf_torch

    add = tf_torch.export("ext_add_kernel.add")
    matmul = tf_torch.export("linalg.matmul")
    total = tf_torch.export("linalg.sum")
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape: int) -> Any:
        t = torch.randn(*shape, device="cuda", dtype=torch.float64, generator=gen)
        return t.requires_grad_()

    a, b, c = rand(3, 4), rand(4, 5), rand(3, 4)
    assert torch.autograd.gradcheck(matmul, (a, b))
    assert torch.autograd.gradcheck(add, (a, c))
    with pytest.raises(tf.UnsupportedError, match="declares no backward"):
        total(a, axis=(0,)).sum().backward()


def test_jax_gradients_on_cuda(cuda_host: tf.Host) -> None:
    jax = _jax_cuda()
    from jax.test_util import check_grads

    from tenferro_host.interop import jax as tf_jax

    add = tf_jax.export("ext_add_kernel.add")
    matmul = tf_jax.export("linalg.matmul")
    device = jax.devices("cuda")[0]
    rng = np.random.default_rng(0)
    a, b, c = (
        jax.device_put(rng.standard_normal(s).astype(np.float32), device)
        for s in ((3, 4), (4, 5), (3, 4))
    )
    check_grads(matmul, (a, b), order=1, modes=("rev",), atol=1e-2, rtol=1e-2)
    check_grads(add, (a, c), order=1, modes=("rev",), atol=1e-2, rtol=1e-2)
