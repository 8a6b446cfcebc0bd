# ruff: noqa: F841, RUF059, B007 - kernels below assign locals only to be refused
"""Register arrays (``K.registers``) and unrolled loops (``K.static_range``): results in the
interpreter, the front-end's refusals at the offending line, and the CUDA C generator (compiled
by NVRTC, no GPU needed), where a tile indexed by unrolled counters stays in registers."""

from __future__ import annotations

import numpy as np
import pytest
from support import register_kernels as rk
from support.dsl_harness import desc, specialize
from support.nvrtc_compile import ptxas_report
from support.source_marks import marker_position
from support.webgpu_harness import View, on_interpreter
from test_frontend import assert_dsl_error

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.benchmarks import gemm_registers as gr
from tenferro_host.errors import DslError, InvalidLaunchConfigError, ValidationError
from tenferro_host.kernel import ir

RNG = np.random.default_rng(36)


def column_major(x: np.ndarray) -> View:
    return View(x.ravel(order="F"), 0, x.shape, (1, x.shape[0]))


def test_a_register_array_holds_each_units_values() -> None:
    x = RNG.standard_normal(24).astype(np.float32)
    (got, _) = on_interpreter(
        rk.scaled_row_sums, 1, 3, View.compact(np.zeros(3, np.float32)), View.compact(x)
    )
    np.testing.assert_allclose(got, 2 * x.reshape(3, 8).sum(axis=1) + 8 + 4, rtol=1e-6)


def test_a_register_array_starts_at_zero_and_takes_run_time_indices() -> None:
    x = RNG.integers(1, 100, 64).astype(np.int32)
    (got, _) = on_interpreter(
        rk.picked, 1, 4, View.compact(np.zeros(4, np.int32)), View.compact(x), np.uint32(5)
    )
    index = (5 + np.arange(4)) % 16
    want = np.where(index % 2 == 0, x.reshape(4, 16)[np.arange(4), index], 0)
    np.testing.assert_array_equal(got, want)


def test_static_range_takes_ranges_forms_and_types_its_counter_by_use() -> None:
    (got,) = on_interpreter(rk.steps, 1, 2, View.compact(np.zeros(2, np.int32)))
    np.testing.assert_array_equal(got, [3 + 1700 + 10] * 2)


def test_a_register_array_updates_in_place() -> None:
    x = RNG.standard_normal(18)
    (got, _) = on_interpreter(
        rk.prefix_in_registers, 1, 3, View.compact(np.zeros(18)), View.compact(x)
    )
    np.testing.assert_allclose(got, np.cumsum(x.reshape(3, 6), axis=1).ravel(), rtol=1e-12)


@pytest.mark.parametrize(
    ("m", "n", "k", "config"),
    [
        (128, 128, 16, 0),
        (100, 70, 13, 0),
        (128, 128, 32, 1),
        (130, 66, 20, 1),
        (128, 64, 24, 2),
        (64, 128, 8, 3),
        (130, 66, 9, 4),
    ],
)
def test_the_register_gemm_multiplies(m: int, n: int, k: int, config: int) -> None:
    cfg = gr.REGISTER_CONFIGS[config]
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    c = column_major(np.zeros((m, n), np.float32))
    count = gr.register_gemm_count(m, n, k, cfg)
    got = on_interpreter(
        gr.register_gemm, count, cfg.dim, c, column_major(a), column_major(b), **cfg.constants
    )
    np.testing.assert_allclose(got[0].reshape((m, n), order="F"), a @ b, rtol=1e-4, atol=1e-4)


@K.kernel
def read_past_the_end(out: K.Array[K.f32], k: K.u32):
    r = K.registers(K.f32, 4)
    out[0] = r[k]  # PAST


def test_the_interpreter_refuses_an_index_out_of_bounds_at_its_line() -> None:
    with pytest.raises(ValidationError, match=r"index 4 of register array 'r' is out of bounds"):
        on_interpreter(read_past_the_end, 1, 1, View.compact(np.zeros(1, np.float32)), 4)


# ------------------------------------------------------------ refusals


@K.kernel
def declared_in_a_loop(out: K.Array[K.f32]):
    for i in range(2):
        r = K.registers(K.f32, 4)  # LOOP
        r[0] = 1.0
        out[i] = r[0]


@K.kernel
def sized_at_launch(out: K.Array[K.f32], n: K.u32):
    r = K.registers(K.f32, n)  # SIZE
    out[0] = r[0]


@K.kernel
def too_many(out: K.Array[K.f32]):
    r = K.registers(K.f32, (32, 9))  # BIG
    out[0] = r[0]


@K.kernel
def of_bools(out: K.Array[K.f32]):
    r = K.registers(K.bool_, 4)  # BOOL
    out[0] = 1.0


@K.kernel
def atomic_on_registers(out: K.Array[K.f32]):
    r = K.registers(K.f32, 4)
    K.atomic_add(r, 0, 1.0)  # ATOMIC
    out[0] = r[0]


@K.kernel
def loaded_four_at_a_time(out: K.Array[K.f32]):
    r = K.registers(K.f32, 4)
    a, b, c, d = K.load4(r, 0)  # LOAD4
    out[0] = a


@K.kernel
def fragment_from_registers(out: K.Array[K.f16]):
    r = K.registers(K.f16, 256)
    f = K.fragment(K.MATRIX_A, K.f16, 16, 16, 16, K.COL_MAJOR)
    K.load_fragment(f, r, 0, 16)  # FRAGMENT
    out[0] = r[0]


@K.kernel
def run_time_bounds(out: K.Array[K.f32], n: K.u32):
    for i in K.static_range(n):  # BOUND
        out[i] = 1.0


@K.kernel
def too_many_trips(out: K.Array[K.f32]):
    for i in K.static_range(2000):  # TRIPS
        out[0] = 1.0


@K.kernel
def zero_step(out: K.Array[K.f32]):
    for i in K.static_range(0, 4, 0):  # STEP
        out[0] = 1.0


@K.kernel
def leaves_an_unrolled_loop(out: K.Array[K.f32]):
    for i in K.static_range(4):
        if out[i] > 0.0:
            break  # BREAK
        out[i] = 1.0


@K.func
def first_positive(x):
    for i in K.static_range(4):
        if x[i] > 0.0:
            return i  # RETURN
    return 4


@K.kernel
def returns_from_an_unrolled_loop(out: K.Array[K.f32], x: K.Array[K.f32]):
    out[0] = K.f32(first_positive(x))


@K.kernel
def counter_named_like_a_local(out: K.Array[K.f32]):
    i = 3
    for i in K.static_range(4):  # SHADOW
        out[i] = 1.0


@K.kernel
def static_range_as_a_value(out: K.Array[K.f32]):
    out[0] = K.f32(K.static_range(4))  # VALUE


def test_refusals() -> None:
    f32 = np.zeros(4, np.float32)
    f16 = np.zeros(4, np.float16)
    n = np.uint32(2)
    assert_dsl_error(declared_in_a_loop, "r = K.registers(K.f32, 4)  # LOOP", "top level", f32)
    assert_dsl_error(sized_at_launch, "n)  # SIZE", "register array's size is a compile", f32, n)
    assert_dsl_error(too_many, "(32, 9))  # BIG", r"1 to 256 elements .* gives 288", f32)
    assert_dsl_error(of_bools, "K.bool_, 4)  # BOOL", "register arrays of bool", f32)
    assert_dsl_error(atomic_on_registers, "r, 0, 1.0)  # ATOMIC", "not an atomic", f32)
    assert_dsl_error(loaded_four_at_a_time, "r, 0)  # LOAD4", "index them one by one", f32)
    assert_dsl_error(fragment_from_registers, "r, 0, 16)  # FRAGMENT", "one unit's", f16)
    assert_dsl_error(run_time_bounds, "n):  # BOUND", "compile-time ints", f32, n)
    assert_dsl_error(too_many_trips, "K.static_range(2000)", "at most 1024", f32)
    assert_dsl_error(zero_step, "0):  # STEP", "step must not be zero", f32)
    assert_dsl_error(leaves_an_unrolled_loop, "break  # BREAK", "no loop to leave", f32)
    with pytest.raises(DslError, match="no loop to leave") as info:  # in the device function
        specialize(returns_from_an_unrolled_loop, f32, f32)
    assert info.value.lineno == marker_position(first_positive, "return i  # RETURN")[0]
    assert_dsl_error(
        counter_named_like_a_local,
        "i in K.static_range(4):  # SHADOW",
        "compile-time int of its",
        f32,
    )
    assert_dsl_error(static_range_as_a_value, "K.static_range(4))", "what a loop runs over", f32)


# ------------------------------------------------------------ CUDA C (NVRTC)


def _report(kernel: K.Kernel, *args: object, **consts: object) -> str:
    from tenferro_host_cuda_jit._codegen import generate

    spec = kernel.specialize([desc(a) for a in args], consts, "cuda", ("sm_90",))
    return ptxas_report(generate(spec).source)


def test_registers_indexed_by_unrolled_counters_stay_in_registers() -> None:
    f32 = View.compact(np.zeros(8, np.float32))
    assert "0 bytes stack frame" in _report(rk.scaled_row_sums, f32, f32)
    big = View(np.zeros(16, np.float32), 0, (4096, 4096), (1, 4096))
    for cfg in gr.REGISTER_CONFIGS:  # the GEMM's 8 x 8 tile, its operands and prefetches
        report = _report(gr.register_gemm, big, big, big, **cfg.constants)
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, report


def test_the_ir_declares_register_arrays_apart_from_shared_ones() -> None:
    spec = rk.scaled_row_sums.specialize(
        [desc(View.compact(np.zeros(1, np.float32)))] * 2, {}, "cpu"
    )
    assert spec.ir.shared == ()
    assert spec.ir.registers == (
        ir.RegisterArray("r", spec.ir.registers[0].dtype, 8, spec.ir.registers[0].line, (2, 4)),
    )
    assert not any(isinstance(s, ir.For) for s in ir.walk(spec.ir.body))  # unrolled


# ------------------------------------------------------------ launch bounds


def test_a_kernel_declared_for_small_cubes_refuses_a_larger_one() -> None:
    host = tf.Host()
    cpu = host.backend("cpu")
    a = cpu.upload(np.zeros((8, 8), np.float32, order="F"))
    with cpu.session() as s, s.exec_session().jit("tests.bounds") as js:
        c = js.alloc_output("float32", (8, 8))
        with pytest.raises(InvalidLaunchConfigError, match=r"at most 256 units .* has 512"):
            js.launch(gr.register_gemm, 1, 512, c, a, a)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_units": 0}, r"max_units=...\) is the most units .* from 1 to 1024, got 0"),
        ({"max_units": 2048}, "to 1024, got 2048"),
        ({"max_units": 64, "min_resident": True}, r"min_resident=...\) is cubes of max_units"),
        ({"cache_size": 0}, "the number of specializations kept"),
    ],
)
def test_kernel_options_are_checked(options: dict, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        K.kernel(**options)(lambda out: None)


def test_cuda_compiles_a_bounded_kernel_for_its_resident_cubes() -> None:
    from tenferro_host_cuda_jit._codegen import generate

    big = View(np.zeros(16, np.float32), 0, (4096, 4096), (1, 4096))
    spec = gr.register_gemm.specialize([desc(big)] * 3, {}, "cuda", ("sm_90",))
    assert spec.bounds == (256, 2)
    assert "__global__ void __launch_bounds__(256, 2) tfk_register_gemm(" in generate(spec).source
