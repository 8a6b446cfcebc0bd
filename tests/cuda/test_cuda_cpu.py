"""CUDA provider pieces that need no GPU: NVRTC, image checks, launch types, probing, build step."""

from __future__ import annotations

import importlib.util
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.cuda import raw

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ext_add_kernel"
BROKEN = 'extern "C" __global__ void k(float* o) {\n  o[0] = nope;\n}\n'


def _nvrtc_or_skip():
    try:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
    except Exception as exc:  # noqa: BLE001 - any failure means "no NVRTC here"
        pytest.skip(f"NVRTC unavailable: {exc}")


def _example_source() -> str:
    from ext_add_kernel import cuda_raw

    return cuda_raw.kernel_source()


# -- NVRTC ------------------------------------------------------------------------------------
def test_nvrtc_compiles_example_kernels_to_ptx_and_sm90_cubin():
    _nvrtc_or_skip()
    from ext_add_kernel.cuda_raw import KERNELS
    from tenferro_host_cuda._images import check_binary, check_ptx

    ptx = raw.nvrtc_compile(_example_source(), raw.NvrtcOptions(arch="compute_90"))
    text = ptx.data.decode()
    assert ptx.kind == "ptx" and ".target sm_90" in text
    assert all(f".entry {name}(" in text for name in KERNELS.values())
    check_ptx(ptx.data)
    cubin = raw.nvrtc_compile(_example_source(), raw.NvrtcOptions(arch="sm_90"))
    assert cubin.kind == "cubin" and cubin.data[:4] == b"\x7fELF"
    assert check_binary(cubin.data) == "cubin"


def test_nvrtc_options_and_name_expressions():
    _nvrtc_or_skip()
    src = (
        "template <typename T> __global__ void fill(T* o) { o[0] = T(N); }\n"
        "template __global__ void fill<float>(float*);\n"
    )
    opts = raw.NvrtcOptions(
        arch="sm_90", std="c++17", defines={"N": 3}, lineinfo=True, name_expressions=["fill<float>"]
    )
    image = raw.nvrtc_compile(src, opts)
    assert image.lowered_names["fill<float>"].startswith("_Z")
    assert opts.flags("sm_90") == [
        "--gpu-architecture=sm_90",
        "--std=c++17",
        "-DN=3",
        "--generate-line-info",
    ]


def test_broken_kernel_gives_compile_error_with_log_and_line():
    _nvrtc_or_skip()
    with pytest.raises(tf.CompileError) as info:
        raw.nvrtc_compile(BROKEN, raw.NvrtcOptions(arch="sm_90"))
    err = info.value
    assert (err.line, err.column) == (2, 10)
    assert "nope" in err.log and "error" in err.log
    assert err.options == ("--gpu-architecture=sm_90",)
    assert isinstance(err, tf.BackendError)


def test_parse_log():
    from tenferro_host_cuda._nvrtc import parse_log

    log = 'a.cu(7): error: expected a ";"\n    int x = 1\n             ^\n\n1 error\n'
    assert parse_log(log) == (7, 12)
    assert parse_log("no location here") == (None, None)


@pytest.mark.parametrize(
    "make",
    [
        lambda: raw.NvrtcOptions(arch="sm_90", ptx=True),  # PTX needs compute_XY
        lambda: raw.NvrtcOptions(arch="x86"),
        lambda: raw.nvrtc_compile("__global__ void k() {}", raw.NvrtcOptions()),  # no arch
        lambda: raw.nvrtc_compile("   ", raw.NvrtcOptions(arch="sm_90")),
    ],
)
def test_nvrtc_option_errors(make):
    with pytest.raises(tf.ValidationError):
        make()


# -- images ----------
@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"garbage",
        b"\x00" * 64,
        b"\x7fELF" + b"\x02" * 10,
        struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1000) + b"x" * 10,
    ],
)
def test_garbage_binary_images(data):
    from tenferro_host_cuda._images import check_binary

    with pytest.raises(tf.ModuleLoadError):
        check_binary(data)


def test_truncated_cubin_and_fatbin():
    _nvrtc_or_skip()
    from tenferro_host_cuda._images import check_binary

    cubin = raw.nvrtc_compile(_example_source(), raw.NvrtcOptions(arch="sm_90")).data
    with pytest.raises(tf.ModuleLoadError, match="truncated"):
        check_binary(cubin[:-100])
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 32) + b"\x00" * 32
    assert check_binary(fatbin) == "fatbin"
    with pytest.raises(tf.ModuleLoadError, match="truncated"):
        check_binary(fatbin[:-1])


@pytest.mark.parametrize(
    "data",
    [
        b"\x7fELF rest",
        b".version 8.0\n\x00.target sm_90",
        b"just text",
        b"\xff\xfe.version .target",
    ],
)
def test_bad_ptx(data):
    from tenferro_host_cuda._images import check_ptx

    with pytest.raises(tf.ModuleLoadError):
        check_ptx(data)


def test_ptx_gets_nul_terminated():
    from tenferro_host_cuda._images import as_bytes, check_ptx

    ptx = ".version 8.0\n.target sm_90\n"
    assert check_ptx(as_bytes(ptx, "ptx", None)) == ptx.encode() + b"\0"
    with pytest.raises(tf.ValidationError):
        as_bytes(123, "ptx", None)


# -- launch types ----------
def test_launch_config():
    cfg = raw.LaunchConfig((4, 2), 128, 1024)
    assert (cfg.grid, cfg.block, cfg.shared_mem_bytes) == ((4, 2, 1), (128, 1, 1), 1024)
    assert hash(cfg) == hash(raw.LaunchConfig((4, 2, 1), (128, 1, 1), 1024))
    assert cfg == raw.LaunchConfig((4, 2, 1), (128, 1, 1), 1024) and cfg.threads_per_block == 128
    assert raw.LaunchConfig.flat(257, 256).grid == (2, 1, 1)
    for bad in (
        lambda: raw.LaunchConfig.flat(0, 128),
        lambda: raw.LaunchConfig(0, 1),
        lambda: raw.LaunchConfig(1, (1, 2, 3, 4)),
        lambda: raw.LaunchConfig(1, 1, -1),
        lambda: raw.LaunchConfig(1.5, 1),
        lambda: raw.LaunchConfig.flat(8, 0),
    ):
        with pytest.raises(tf.InvalidLaunchConfigError):
            bad()


def test_typed_scalars():
    assert [
        s(1).nbytes for s in (raw.i32, raw.u32, raw.i64, raw.u64, raw.f32, raw.f64, raw.f16)
    ] == [4, 4, 8, 8, 4, 8, 2]
    assert raw.bool_(True).nbytes == 1
    assert raw.f16(1.5).numpy().dtype == np.float16 and raw.i64(-3).numpy() == -3
    assert raw.f32(0.1).value == float(np.float32(0.1))
    for bad in (
        lambda: raw.i32(2**31),
        lambda: raw.u32(-1),
        lambda: raw.i32(1.0),
        lambda: raw.f32("1"),
        lambda: raw.bool_(1),
        lambda: raw.i64(True),
    ):
        with pytest.raises(tf.ValidationError):
            bad()


# -- probing and imports ----------
def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_loads_no_gpu_library():
    proc = _run(
        "import sys, tenferro_host_cuda, tenferro_host.cuda as c; c.raw; "
        "print(sorted(m for m in sys.modules if m == 'cuda' or m.startswith('cuda.')))"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_without_cuda_python_the_backend_is_unavailable_with_a_reason():
    proc = _run(
        "import sys; sys.modules['cuda'] = None; sys.modules['cuda.bindings'] = None\n"
        "import json, tenferro_host as tf\n"
        "s = tf.Host().backend_status('cuda')\n"
        "print(json.dumps([s.available, s.reason]))"
    )
    assert proc.returncode == 0, proc.stderr
    available, reason = json.loads(proc.stdout)
    assert available is False and "cuda-python is not installed" in reason


def test_without_the_driver_the_reason_is_one_line_and_a_runtime_is_unsupported():
    pytest.importorskip("cuda.bindings")
    proc = _run(
        "import json, cuda.bindings.driver as d, cuda.pathfinder as p\n"
        "def cu_init(flags): raise p.DynamicLibNotFoundError('loader: libcuda.so.1 not found')\n"
        "d.cuInit = cu_init  # what cuda.bindings does on a machine without the driver\n"
        "import tenferro_host as tf\n"
        "out = [tf.Host().backend_status('cuda').reason]\n"
        "try:\n"
        "    tf.cuda.CudaRuntime(0)\n"
        "except tf.UnsupportedError as exc:\n"
        "    out += [exc.backend, exc.feature, exc.reason, str(exc.__cause__)]\n"
        "print(json.dumps(out))"
    )
    assert proc.returncode == 0, proc.stderr
    reason, backend, feature, again, cause = json.loads(proc.stdout)
    assert reason == again == "no NVIDIA driver found (libcuda.so.1)"
    assert (backend, feature) == ("cuda", "driver")
    assert "libcuda.so.1" in cause  # the loader's words: dlopen's (checked first) or cuda.bindings'


def test_caps_reason_when_no_gpu():
    status = tf.Host().backend_status("cuda")
    if status.available:
        pytest.skip("a CUDA device is present")
    assert status.reason and not status.devices
    with pytest.raises(tf.UnsupportedError):
        tf.Host().backend("cuda")


# -- the example's build step ----------
def _setup_module(monkeypatch):
    import setuptools

    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: None)
    spec = importlib.util.spec_from_file_location("ext_add_kernel_setup", EXAMPLE / "setup.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_step_makes_a_fatbin_with_nvcc(monkeypatch, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    from tenferro_host_cuda._images import check_binary

    info = _setup_module(monkeypatch).build_kernels(EXAMPLE / "ext_add_kernel", tmp_path)
    assert info["fatbin"] == "add_kernel.fatbin" and len(info["gencode"]) == 3
    assert "release" in info["nvcc"]
    assert check_binary((tmp_path / "add_kernel.fatbin").read_bytes()) == "fatbin"
    assert json.loads((tmp_path / "build_info.json").read_text()) == info


def test_build_step_without_nvcc_records_why(monkeypatch, tmp_path):
    monkeypatch.setenv("EXT_ADD_KERNEL_NO_NVCC", "1")
    info = _setup_module(monkeypatch).build_kernels(EXAMPLE / "ext_add_kernel", tmp_path)
    assert info["fatbin"] is None and "EXT_ADD_KERNEL_NO_NVCC" in info["reason"]
    assert not (tmp_path / "add_kernel.fatbin").exists()
