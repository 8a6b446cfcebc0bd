"""The raw CUDA seam on a real GPU: modules, checked launches, borrows, handles, limits."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from support.cuda_support import ADD_SRC, SMEM_SRC, STRIDED_SRC, cuda_runtime, raw_session

import tenferro_host as tf
from tenferro_host.cuda import raw

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]


@pytest.fixture
def rt():
    return cuda_runtime()


def _inputs(rt, n=1000):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return a, b, rt.upload(a), rt.upload(b)


def _add(rs, module, ta, tb, n):
    out = rs.alloc_output(tf.float32, (n,))
    rs.launch(
        module.function("add_kernel"),
        raw.LaunchConfig.flat(n, 128),
        [rs.tensor_mut(out), rs.tensor(ta), rs.tensor(tb), raw.i32(n)],
    )
    return out


# -- device info and runtime basics ----------
def test_device_info_and_caps(rt):
    info = rt.device_info
    assert info.compute_capability >= (7, 5) and info.arch.startswith("sm_")
    assert info.max_threads_per_block >= 1024 and info.memory_pools_supported
    assert info.driver_version >= (12, 0) and info.nvrtc_version is not None
    assert isinstance(rt.device, tf.CudaDeviceUuid) and str(rt.device).startswith("GPU-")
    status = rt.host.backend_status("cuda")
    assert status.available and status.devices[0]["uuid"] == str(info.uuid)
    caps = rt.capabilities()
    assert caps[tf.ExtensionCapability.NATIVE_MODULE] and caps[tf.ExtensionCapability.RAW_STREAM]
    assert caps[tf.ExtensionCapability.RUNTIME_COMPILATION]


def test_upload_download_zeros_canonicalize(rt):
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    t = rt.upload(x)
    np.testing.assert_array_equal(t.download(), x)
    np.testing.assert_array_equal(rt.zeros(tf.int32, (3, 5)).download(), np.zeros((3, 5)))
    view = t.permute(2, 0, 1)[1:, :, ::2]
    assert not view.is_compact()
    c = rt.canonicalize(view)
    assert c.is_compact() and c.storage is not t.storage
    np.testing.assert_array_equal(c.download(), x.transpose(2, 0, 1)[1:, :, ::2])
    for dt in (np.float16, np.bool_, np.complex128, np.int64):
        arr = (np.arange(6).reshape(2, 3) % 2).astype(dt)
        np.testing.assert_array_equal(rt.canonicalize(rt.upload(arr).T).download(), arr.T)


def test_out_of_memory_is_typed(rt):
    too_many = 2 * rt.device_info.total_memory // 4
    with pytest.raises(tf.OutOfMemoryError) as info:
        rt.empty(tf.uint32, (too_many,))
    assert info.value.nbytes == 4 * too_many and "used_current" in info.value.pool_stats


# -- module round trips ----------
def test_nvrtc_cubin_round_trip_seed_flow(rt):
    a, b, ta, tb = _inputs(rt, 8)
    host = rt.host
    with rt.session() as s:
        ex = tf.cuda.exec_session(s)
        assert ex.supports(tf.ExtensionCapability.NATIVE_MODULE)
        with ex.raw("custom_cuda.add") as rs:
            module = rs.compile_nvrtc(ADD_SRC, raw.NvrtcOptions())
            assert module.kind == "cubin"
            out = _add(rs, module, ta, tb, 8)
            rs.synchronize()
    np.testing.assert_allclose(out.download(), a + b)
    assert host is rt.host


def test_ptx_round_trip(rt):
    a, b, ta, tb = _inputs(rt)
    virtual = rt.device_info.arch.replace("sm", "compute")
    ptx = raw.nvrtc_compile(ADD_SRC, raw.NvrtcOptions(arch=virtual))
    assert ptx.kind == "ptx"
    with raw_session(rt) as (_, rs):
        for module in (
            rs.load_ptx(ptx.data),
            rs.load_ptx(ptx.data.decode()),
            rs.compile_nvrtc(ADD_SRC, raw.NvrtcOptions(ptx=True)),
        ):
            assert module.kind == "ptx"
            out = _add(rs, module, ta, tb, a.size)
    np.testing.assert_allclose(out.download(), a + b)


def test_cubin_round_trip(rt):
    a, b, ta, tb = _inputs(rt)
    cubin = raw.nvrtc_compile(ADD_SRC, raw.NvrtcOptions(arch=rt.device_info.arch))
    with raw_session(rt) as (_, rs):
        out = _add(rs, rs.load_cubin(cubin.data), ta, tb, a.size)
    np.testing.assert_allclose(out.download(), a + b)


def test_fatbin_round_trip_from_example_build(rt):
    from ext_add_kernel import cuda_raw

    info = cuda_raw.build_info()
    if not info.get("fatbin"):
        pytest.skip(f"ext_add_kernel was built without a fatbin: {info.get('reason')}")
    image = cuda_raw._fatbin()
    assert image is not None and image[:4] == b"\x50\xed\x55\xba"
    a, b, ta, tb = _inputs(rt)
    with raw_session(rt) as (_, rs):
        module = rs.load_cubin(image)
        assert module.kind == "fatbin"
        out = _add(rs, module, ta, tb, a.size)
    np.testing.assert_allclose(out.download(), a + b)


def test_example_op_cuda_raw_all_dtypes(rt):
    host = rt.host
    assert host.variants_by_backend("ext_add_kernel.add").get("cuda") == "cuda-raw"
    for dt in ("float32", "float64", "float16", "int32", "uint32", "int64"):
        x = (np.arange(300) % 17).astype(dt)
        y = (np.arange(300) % 5).astype(dt)
        out = host.run("ext_add_kernel.add", rt.upload(x), rt.upload(y))
        np.testing.assert_array_equal(out.download(), x + y)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = host.run("ext_add_kernel.add", rt.upload(x).T, rt.upload(x.T.copy()))
    np.testing.assert_array_equal(out.download(), 2 * x.T)


def test_cli_run_check_on_cuda(tmp_path):
    import subprocess
    import sys

    cuda_runtime()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenferro_host",
            "run",
            "ext_add_kernel.add",
            "--backend",
            "cuda",
            "--check",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- failures before the driver ----------
@pytest.mark.parametrize(
    "image",
    [
        b"",
        b"garbage bytes",
        b"\x7fELF" + b"\x02" * 20,
        b"\x50\xed\x55\xba\x01\x00\x10\x00" + b"\xff" * 8 + b"x",
    ],
)
def test_garbage_and_truncated_cubin(rt, image):
    with raw_session(rt) as (_, rs), pytest.raises(tf.ModuleLoadError):
        rs.load_cubin(image)


def test_truncated_real_images(rt):
    cubin = raw.nvrtc_compile(ADD_SRC, raw.NvrtcOptions(arch=rt.device_info.arch)).data
    with raw_session(rt) as (_, rs):
        with pytest.raises(tf.ModuleLoadError, match="truncated"):
            rs.load_cubin(cubin[: len(cubin) // 2])
        with pytest.raises(tf.ModuleLoadError):
            rs.load_ptx(b"\x00\x01garbage")
        with pytest.raises(tf.ModuleLoadError):
            rs.load_ptx(".version 8.0\n.target sm_90\n.address_size 64\n.entry broken( {")


def test_missing_symbol(rt):
    with raw_session(rt) as (_, rs):
        module = rs.compile_nvrtc(ADD_SRC)
        with pytest.raises(tf.SymbolLookupError, match="no_such_kernel"):
            module.function("no_such_kernel")


def test_compile_failure_has_log_and_line(rt):
    src = 'extern "C" __global__ void k(float* o) {\n    o[0] = undefined_name;\n}\n'
    with raw_session(rt) as (_, rs), pytest.raises(tf.CompileError) as info:
        rs.compile_nvrtc(src)
    err = info.value
    assert err.line == 2 and err.column == 12 and "undefined_name" in err.log
    assert any(o.startswith("--gpu-architecture=sm_") for o in err.options)


def test_argument_count_and_size_mismatch(rt):
    _, _, ta, tb = _inputs(rt, 16)
    with raw_session(rt) as (_, rs):
        fn = rs.compile_nvrtc(ADD_SRC).function("add_kernel")
        assert fn.param_sizes == (8, 8, 8, 4)
        out = rs.tensor_mut(rs.alloc_output(tf.float32, (16,)))
        refs = [out, rs.tensor(ta), rs.tensor(tb)]
        cfg = raw.LaunchConfig.flat(16)
        with pytest.raises(tf.ArgumentMismatchError, match="takes 4 arguments, got 3"):
            rs.launch(fn, cfg, refs)
        with pytest.raises(tf.ArgumentMismatchError, match=r"argument 3 .* 8 bytes"):
            rs.launch(fn, cfg, [*refs, raw.i64(16)])
        with pytest.raises(tf.ArgumentMismatchError, match="bare Python number"):
            rs.launch(fn, cfg, [*refs, 16])
        with pytest.raises(tf.ArgumentMismatchError, match="argument 0"):
            rs.launch(fn, cfg, [raw.f32(1.0), *refs[1:], raw.i32(16)])
        with pytest.raises(tf.ValidationError):
            raw.i32(2**31)


# -- launch limits ----------
def test_every_launch_limit(rt):
    info = rt.device_info
    with raw_session(rt) as (_, rs):
        module = rs.compile_nvrtc(SMEM_SRC)
        dyn, bounded, static = (module.function(n) for n in ("dyn_smem", "bounded", "static_smem"))
        out = rs.tensor_mut(rs.alloc_output(tf.float32, (1,)))
        n = raw.i32(1)
        gx, gy, gz = info.max_grid_dims
        bx, by, bz = info.max_block_dims
        bad = [
            (dyn, raw.LaunchConfig((gx + 1, 1, 1), 32), "grid x"),
            (dyn, raw.LaunchConfig((1, gy + 1, 1), 32), "grid y"),
            (dyn, raw.LaunchConfig((1, 1, gz + 1), 32), "grid z"),
            (dyn, raw.LaunchConfig(1, (bx + 1, 1, 1)), "block x"),
            (dyn, raw.LaunchConfig(1, (1, by + 1, 1)), "block y"),
            (dyn, raw.LaunchConfig(1, (1, 1, bz + 1)), "block z"),
            (dyn, raw.LaunchConfig(1, (32, 32, 2)), "2048 threads"),
            (bounded, raw.LaunchConfig(1, 256), "limit of 128"),
            (
                dyn,
                raw.LaunchConfig(1, 32, info.max_shared_memory_per_block_optin + 4),
                "dynamic shared memory",
            ),
            (
                static,
                raw.LaunchConfig(1, 32, info.max_shared_memory_per_block_optin - 16 * 1024),
                "static",
            ),
        ]
        before = rt.stats()
        for fn, cfg, words in bad:
            args = [out, n] if fn is dyn else [out]
            with pytest.raises(tf.InvalidLaunchConfigError, match=words):
                rs.launch(fn, cfg, args)
        assert rt.stats() == before  # nothing was enqueued or recorded
        with pytest.raises(tf.InvalidLaunchConfigError):
            raw.LaunchConfig.flat(0, 128)
        with pytest.raises(tf.InvalidLaunchConfigError):
            raw.LaunchConfig(0, 32)


def test_dynamic_shared_memory_opt_in(rt):
    nfloats = 64 * 1024 // 4 + 1000  # above the 48 KiB default
    with raw_session(rt) as (_, rs):
        fn = rs.compile_nvrtc(SMEM_SRC).function("dyn_smem")
        out = rs.alloc_output(tf.float32, (1,))
        rs.launch(fn, raw.LaunchConfig(1, 256, nfloats * 4), [rs.tensor_mut(out), raw.i32(nfloats)])
    assert out.download()[0] == nfloats - 1


# -- residency, layout, aliasing ----------
def test_foreign_runtime_and_host_tensors(rt):
    other = rt.host.new_backend("cuda")
    assert other is not rt and other.device == rt.device and other.domain != rt.domain
    foreign = other.upload(np.ones(4, np.float32))
    cpu_t = rt.host.backend("cpu").upload(np.ones(4, np.float32))
    with raw_session(rt) as (_, rs):
        with pytest.raises(tf.ForeignRuntimeError, match="copy_from_same_device"):
            rs.tensor(foreign)
        with pytest.raises(tf.ForeignRuntimeError, match="upload it first"):
            rs.tensor_mut(cpu_t)
        with pytest.raises(tf.ForeignRuntimeError, match="upload"):
            rs.tensor(np.ones(4, np.float32))


def test_non_compact_view_and_strided_kernel(rt):
    x = np.arange(5 * 7, dtype=np.float32).reshape(5, 7)
    t = rt.upload(x)
    view = t[1:4, ::2].T  # shape (4, 3), non-compact, offset 1
    expected = x[1:4, ::2].T
    with raw_session(rt) as (_, rs):
        with pytest.raises(tf.InvalidLayoutError, match=r"rs\.tensor_strided\(t\)"):
            rs.tensor(view)
        with pytest.raises(tf.InvalidLayoutError, match=r"rs\.tensor_strided_mut\(t\)"):
            rs.tensor_mut(view)
        ref = rs.tensor_strided(view)
        assert (ref.offset, ref.shape, ref.strides) == (view.offset, view.shape, view.strides)
        fn = rs.compile_nvrtc(STRIDED_SRC).function("copy2d")
        out = rs.alloc_output(tf.float32, view.shape)
        n0, n1 = view.shape
        rs.launch(
            fn,
            raw.LaunchConfig.flat(n0 * n1, 64),
            [
                rs.tensor_mut(out),
                ref,
                raw.i64(ref.offset),
                raw.i32(n0),
                raw.i32(n1),
                raw.i64(ref.strides[0]),
                raw.i64(ref.strides[1]),
            ],
        )
    np.testing.assert_array_equal(out.download(), expected)


def test_aliasing(rt):
    t = rt.upload(np.zeros(8, np.float32))
    with raw_session(rt) as (_, rs):
        shared = [rs.tensor(t), rs.tensor(t[2:])]  # shared borrows repeat
        with pytest.raises(tf.AliasingError):
            rs.tensor_mut(t[4:])
        del shared  # a borrow lasts as long as its ref
        writer = rs.tensor_mut(t[:4])
        with pytest.raises(tf.AliasingError):
            rs.tensor(t[4:])  # a view of the same storage
        with pytest.raises(tf.AliasingError):
            rs.tensor_mut(t)
        assert writer.readonly is False
    with raw_session(rt) as (_, rs):
        rs.tensor_mut(t)  # borrows end with their session


# -- handles, threads ----------
def test_handles_used_after_exit(rt):
    _, _, ta, tb = _inputs(rt, 8)
    with raw_session(rt) as (_, rs):
        fn = rs.compile_nvrtc(ADD_SRC).function("add_kernel")
        out = rs.alloc_output(tf.float32, (8,))
        args = [rs.tensor_mut(out), rs.tensor(ta), rs.tensor(tb), raw.i32(8)]
        prepared = rs.prepare(fn, raw.LaunchConfig.flat(8), args)
        stream, ws = rs.stream, rs.workspace(64)
        assert stream.native_handle_unsafe() and ws.data_ptr_unsafe()
    for call in (
        lambda: args[0].data_ptr_unsafe(),
        stream.native_handle_unsafe,
        ws.data_ptr_unsafe,
        prepared.launch,
        lambda: rs.tensor(ta),
        lambda: rs.launch(fn, raw.LaunchConfig.flat(8), args),
        lambda: args[1].__cuda_array_interface__,
    ):
        with pytest.raises(tf.SessionClosedError):
            call()
    with raw_session(rt) as (_, rs2), pytest.raises(tf.SessionClosedError):
        rs2.launch(fn, raw.LaunchConfig.flat(8), args)  # old refs in a new session


def test_wrong_thread(rt):
    _, _, ta, _ = _inputs(rt, 8)
    errors = []
    with raw_session(rt) as (ex, rs):
        ref = rs.tensor(ta)

        def other():
            for call in (
                lambda: rs.tensor(ta),
                ref.data_ptr_unsafe,
                lambda: ex.raw("x"),
                lambda: rs.stream,
            ):
                try:
                    call()
                except tf.WrongThreadError:
                    errors.append(True)

        th = threading.Thread(target=other)
        th.start()
        th.join()
    assert errors == [True] * 4


def test_prepared_launch_and_swap(rt):
    a, b, ta, tb = _inputs(rt, 256)
    with raw_session(rt) as (_, rs):
        fn = rs.compile_nvrtc(ADD_SRC).function("add_kernel")
        out1, out2 = (rs.alloc_output(tf.float32, (256,)) for _ in range(2))
        cfg = raw.LaunchConfig.flat(256)
        p = rs.prepare(fn, cfg, [rs.tensor_mut(out1), rs.tensor(ta), rs.tensor(tb), raw.i32(256)])
        p.launch()
        p.launch(args=[rs.tensor_mut(out2), rs.tensor(tb), rs.tensor(tb), raw.i32(256)])
        with pytest.raises(tf.ArgumentMismatchError):
            p.launch(args=[rs.tensor(ta), rs.tensor(tb), raw.i32(1)])
    np.testing.assert_allclose(out1.download(), a + b)
    np.testing.assert_allclose(out2.download(), 2 * b)


def test_empty_tensors(rt):
    e = rt.upload(np.zeros((0, 3), np.float32))
    assert e.download().shape == (0, 3) and rt.zeros(tf.float32, (4, 0)).numel == 0
    assert rt.canonicalize(e.T).shape == (3, 0)
    with raw_session(rt) as (_, rs):
        assert rs.tensor(e).data_ptr_unsafe() == 0
        assert rs.alloc_output(tf.float64, (0,)).numel == 0
        assert rs.workspace(0).nbytes == 0
    out = rt.host.run("ext_add_kernel.add", e, e)
    assert out.shape == (0, 3)


def test_cuda_array_interface_on_refs(rt):
    cupy = pytest.importorskip("cupy")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = rt.upload(x)
    with raw_session(rt) as (_, rs):
        arr = cupy.asarray(rs.tensor_strided(t.T))
        np.testing.assert_array_equal(cupy.asnumpy(arr), x.T)
