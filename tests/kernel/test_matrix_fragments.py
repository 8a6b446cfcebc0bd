"""Matrix fragments (``K.fragment``/``K.mma``): numpy's result on the interpreter with the
documented accumulation order, the checking rules of warps (whole, uniform operands, written
before use, aligned), typed refusals at specialization, the CUDA C compiling to an sm_90 CUBIN
(PTX ``wmma``), and the f16 tensor-core GEMM of the bench."""

from __future__ import annotations

import numpy as np
import pytest
from support import matrix_kernels as mk
from support.nvrtc_compile import compile_sm90
from support.source_marks import marker_line
from support.webgpu_harness import View, on_interpreter
from tenferro_host_cuda_jit._codegen import generate

import tenferro_host as tf
from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.benchmarks import gemm_f16 as gemm
from tenferro_host.benchmarks import gemm_mma
from tenferro_host.compile_only import compile_only
from tenferro_host.errors import (
    DslError,
    InvalidLaunchConfigError,
    UnsupportedError,
    ValidationError,
)
from tenferro_host.kernel import ir

RNG = np.random.default_rng(26)
F16, F32 = dtypes.float16, dtypes.float32


def f16(shape: tuple[int, ...]) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float16)


def in_k_order(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """c + a @ b with the k products added to c one at a time, in f32 (the documented order)."""
    acc = c.astype(np.float32).copy()
    for k in range(a.shape[1]):
        acc += np.outer(a[:, k].astype(np.float32), b[k, :].astype(np.float32))
    return acc


# ------------------------------------------------------------ semantics


@pytest.mark.parametrize("ld", [16, 24])
def test_column_major_tiles_of_two_cubes_in_k_order(ld: int) -> None:
    warps = 4  # two cubes of two warps, one tile each
    a, b = f16((warps * 16 * ld,)), f16((warps * 16 * ld,))
    c = RNG.standard_normal(warps * 16 * ld).astype(np.float32)
    got, _, _ = on_interpreter(
        mk.tile_col, 2, 64, View.compact(c), View.compact(a), View.compact(b), np.uint32(ld)
    )
    for w in range(warps):
        at = w * 16 * ld

        def tile(x: np.ndarray, at: int = at) -> np.ndarray:
            return x[at : at + 16 * ld].reshape(16, ld).T[:16]  # column-major, ld apart

        np.testing.assert_array_equal(tile(got), in_k_order(tile(a), tile(b), tile(c)))


@pytest.mark.parametrize("m,n", [(16, 16), (32, 8), (8, 32)])
def test_row_major_shapes_from_shared_memory(m: int, n: int) -> None:
    a, b = f16((m * 16,)), f16((16 * n,))
    d = np.zeros(m * n, np.float32)
    got, _, _ = on_interpreter(
        mk.tile_row_shared, 1, 32, View.compact(d), View.compact(a), View.compact(b), m=m, n=n
    )
    want = in_k_order(a.reshape(m, 16), b.reshape(16, n), np.zeros((m, n), np.float32))
    np.testing.assert_array_equal(got.reshape(m, n), want)


def test_fill_reaches_every_element_of_every_warp() -> None:
    (got,) = on_interpreter(
        mk.fill_and_store, 2, 64, View.compact(np.zeros(1024, np.float32)), np.float32(2.5)
    )
    np.testing.assert_array_equal(got, np.full(1024, 2.5, np.float32))


@pytest.mark.parametrize(
    "m,n,k,step", [(128, 128, 32, 32), (256, 128, 64, 32), (128, 256, 128, 16)]
)
def test_the_f16_gemm_equals_numpy(m: int, n: int, k: int, step: int) -> None:
    a, b = f16((m, k)), f16((k, n))
    c, _, _ = on_interpreter(
        gemm.gemm_f16,
        gemm.gemm_f16_count(m, n),
        gemm.UNITS,
        View.compact(np.zeros((m, n), np.float32)),
        View.compact(a),
        View.compact(b),
        step=step,
    )
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.reshape(m, n, order="F"), want, rtol=1e-5, atol=1e-4)


def test_m16n8k16_fragment_arrays_from_shared_memory_in_k_order() -> None:
    """Two k-steps of a column-major ``a`` and a row-major ``b``, each fragment an element of
    an array indexed by ``K.static_range`` counters."""
    la = 24
    a, b = f16((16, 32)), f16((32, 16))
    a_mem = np.zeros(1024, np.float16)
    a_mem[: 32 * la].reshape(32, la)[:, :16] = a.T  # element (i, k) at i + k * la
    d, _, _ = on_interpreter(
        mk.tile_mma,
        1,
        32,
        View.compact(np.zeros(256, np.float32)),
        View.compact(a_mem),
        View.compact(b.reshape(-1)),
        la=la,
    )
    want = np.hstack(
        [in_k_order(a, b[:, :8], np.zeros((16, 8))), in_k_order(a, b[:, 8:], np.zeros((16, 8)))]
    )
    np.testing.assert_array_equal(d.reshape(16, 16, order="F"), want)


@pytest.mark.parametrize("config", range(len(gemm_mma.MMA_CONFIGS)))
def test_the_m16n8k16_gemm_equals_numpy(config: int) -> None:
    cfg = gemm_mma.MMA_CONFIGS[config]
    m, n, k = 2 * cfg["BM"], cfg["BN"], 3 * cfg["BK"]
    a, b = f16((m, k)), f16((k, n))
    c, _, _ = on_interpreter(
        gemm_mma.mma_gemm,
        gemm_mma.mma_gemm_count(m, n, k, cfg),
        cfg.dim,
        View.compact(np.zeros((m, n), np.float32)),
        View.compact(a),
        View.compact(b),
        **cfg.constants,
    )
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.reshape(m, n, order="F"), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "m,n,k,match",
    [
        (200, 128, 64, r"m = 200 is not a multiple of BM = 128"),
        (128, 100, 64, r"n = 100 is not a multiple of BN = 128"),
        (128, 128, 40, r"k = 40 is not a multiple of BK = 32"),
        (0, 128, 32, r"at least one block"),
    ],
)
def test_a_shape_the_mma_blocks_do_not_divide(m: int, n: int, k: int, match: str) -> None:
    with pytest.raises(InvalidLaunchConfigError, match=match):
        gemm_mma.mma_gemm_count(m, n, k, gemm_mma.MMA_CONFIGS[0])


def test_a_ragged_mma_launch_is_refused_before_it_runs_and_tuning_skips_such_configs() -> None:
    """A launch in a config whose blocks do not divide the shape is refused before it runs; the
    tuner skips those configs, with a warning, and runs the one that fits (64 x 128 x 32)."""
    m, n, k = 64, 128, 32
    a, b = f16((m, k)), f16((k, n))
    rt = tf.Host().backend("cpu")
    with rt.session() as s, s.exec_session().jit("test.mma") as js:
        c = js.alloc_output("float32", (m, n))
        ga, gb = rt.upload(a), rt.upload(b)
        with pytest.raises(InvalidLaunchConfigError, match="m = 64 is not a multiple of BM = 128"):
            gemm_mma.MMA_GEMM.launch(js, c, ga, gb, gemm_mma.MMA_CONFIGS[0])
        tuned = gemm_mma.MMA_GEMM.autotuned(timer=lambda js, config, run: run() or 1.0)
        with pytest.warns(K.AutotuneWarning, match=r"config 0 .*m = 64 is not a multiple"):
            gemm_mma.MMA_GEMM.launch_tuned(js, c, ga, gb, tuned)
    (choice,) = tuned.choices().values()
    assert choice.config == gemm_mma.MMA_CONFIGS[-1]
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.download(), want, rtol=1e-5, atol=1e-4)


# ------------------------------------------------------------ the checking rules


def test_a_fragment_statement_in_half_a_warp_is_divergent() -> None:
    with pytest.raises(K.DivergentFragmentError, match="16 of the 32 units"):
        on_interpreter(mk.divergent_warp, 1, 32, View.compact(np.zeros(1, np.float32)))


def test_a_start_that_differs_between_the_units_of_a_warp() -> None:
    with pytest.raises(K.DivergentFragmentError, match="start of a fragment statement differs"):
        on_interpreter(mk.start_per_unit, 1, 32, View.compact(np.zeros(1024, np.float32)))


def test_a_fragment_stored_before_it_is_written() -> None:
    with pytest.raises(K.UnwrittenFragmentError, match="'acc' is used before"):
        on_interpreter(mk.store_unwritten, 1, 32, View.compact(np.zeros(256, np.float32)))


@pytest.mark.parametrize("start,ld", [(4, 16), (0, 18)])
def test_a_misaligned_start_or_leading_dimension(start: int, ld: int) -> None:
    out = View.compact(np.zeros(1024, np.float32))
    with pytest.raises(ValidationError, match=r"multiple of 8 elements \(32 bytes\)"):
        on_interpreter(mk.misaligned, 1, 32, out, np.uint32(start), np.uint32(ld))


def test_a_view_offset_counts_in_the_alignment() -> None:
    storage = np.zeros(1024 + 4, np.float32)
    with pytest.raises(ValidationError, match="starts at element 4"):
        on_interpreter(
            mk.misaligned, 1, 32, View(storage, 4, (1024,), (1,)), np.uint32(0), np.uint32(16)
        )


def test_a_fragment_store_to_shared_memory_needs_a_barrier_before_a_read() -> None:
    with pytest.raises(K.SharedRaceError, match="several units"):
        on_interpreter(mk.store_race, 1, 32, View.compact(np.zeros(32, np.float32)))


def test_cubes_that_are_not_whole_warps_are_refused() -> None:
    with pytest.raises(InvalidLaunchConfigError, match="multiple of 32"):
        on_interpreter(
            mk.fill_and_store, 1, 48, View.compact(np.zeros(512, np.float32)), np.float32(1)
        )


def test_a_jit_launch_of_a_partial_warp_is_refused_before_it_runs() -> None:
    rt = tf.Host().backend("cpu")
    out = rt.upload(np.zeros(512, np.float32))
    with rt.session() as s, tf.cpu.exec_session(s).jit("tests.matrix") as js:
        with pytest.raises(InvalidLaunchConfigError, match="warps of 32 units"):
            js.launch(mk.fill_and_store, 1, 40, out, np.float32(1))


# ------------------------------------------------------------ refusals at specialization


@pytest.mark.parametrize(
    "kern,marker,match",
    [
        (mk.a_of_f32, "DTYPE", "holds f16"),
        (mk.shape_m4, "SHAPE", "m4n4k4 is not a fragment shape"),
        (mk.store_of_a, "STORE_A", "K.ACCUMULATOR here"),
        (mk.mma_shapes, "SHAPES", "one m, n, k shape"),
        (mk.fragment_in_loop, "NESTED", "top level of the kernel body"),
        (mk.fragment_as_value, "VALUE", "is a matrix fragment, not a value"),
        (mk.load_of_other_type, "TYPE", "fragments load and store their own element type"),
        (mk.fragment_unnamed, "UNNAMED", r"declare a fragment with a name: f = K\.fragment"),
        (mk.statement_as_value, "AS_VALUE", r"K\.fill_fragment\(\.\.\.\) is a statement"),
        (mk.fill_of_one_argument, "ARITY", "K.fill_fragment takes 2 positional arguments"),
        (mk.fragment_pair, "TUPLE", "assign a fragment to one name"),
        (mk.fragment_of_five, "FIVE", r"takes \(use, element type, m, n, k, layout\[, count\]\)"),
        (mk.fragment_named_as_a_parameter, "REDECLARED", "'c' is already a parameter"),
        (mk.layout_as_use, "USE", "use is K.MATRIX_A, K.MATRIX_B or K.ACCUMULATOR, not K.ROW"),
        (mk.value_into_a_fragment, "ASSIGNED", "'acc' is a matrix fragment; fill, load or mma"),
        (mk.array_at_runtime_index, "RUNTIME_INDEX", "index an array of fragments with compile"),
        (mk.array_out_of_range, "OUT_OF_RANGE", "index 2 is out of range for 'acc''s dimension"),
        (mk.array_unindexed, "UNINDEXED", r"'acc' is an array of fragments: name one of them"),
        (mk.array_of_one_index_too_few, "RANK", "'acc' is a 2-d array of fragments; give 2"),
        (mk.array_too_large, "LARGE", r"fragment array holds 1 to 64 elements .* gives 72"),
        (mk.array_over_a_fragment, "ELEMENT", "fragment 'acc__1' names an element of the array"),
        (mk.array_element_as_value, "ELEMENT_VALUE", "'acc' holds matrix fragments, not values"),
        (mk.array_of_values_as_fragments, "NOT_FRAGMENTS", "c is not an array of fragments"),
    ],
)
def test_typed_refusals(kern: K.Kernel, marker: str, match: str) -> None:
    descs = [K.ArrayDesc(F16 if kern is mk.store_of_a else F32, 1)]
    with pytest.raises(DslError, match=match) as info:
        kern.specialize(descs, {}, "cpu")
    assert info.value.lineno == marker_line(kern, marker)


@pytest.mark.parametrize("target", ["cpu", "cuda", "wgsl"])
@pytest.mark.parametrize(
    "kern,marker,match",
    [
        (mk.a_of_f32, "DTYPE", r"K\.MATRIX_A fragment holds f16 \(f16 x f16 -> f32 .*\), not f32"),
        (mk.accumulator_of_f16, "DTYPE", r"K\.ACCUMULATOR fragment holds f32 .*, not f16"),
        (mk.shape_m4, "SHAPE", r"m4n4k4 is not a fragment shape .*; use one of m16n16k16, "),
        (mk.shape_k8, "SHAPE", r"m16n16k8 is not a fragment shape .*; use one of m16n16k16, "),
    ],
)
def test_an_unsupported_dtype_or_shape_is_refused_on_every_target(
    kern: K.Kernel, marker: str, match: str, target: str
) -> None:
    """Every target refuses them at specialization, naming the line and what it takes."""
    with pytest.raises(DslError, match=match) as info:
        if target == "cpu":
            kern.specialize([K.ArrayDesc(F32, 1)], {}, "cpu")
        else:
            if target == "cuda":
                pytest.importorskip("cuda.bindings", reason="the cuda target needs the cuda extra")
            compile_only(kern, target, ["float32[1]"])
    assert info.value.lineno == marker_line(kern, marker)


def test_wgsl_fragments_need_shader_f16_among_the_features_named() -> None:
    sig = ["float32[1]", "float16[1]", "float16[1]", "uint32"]
    assert "enable f16;" in compile_only(mk.tile_col, "wgsl", sig, features=["shader-f16"]).source
    with pytest.raises(UnsupportedError, match="'shader-f16' feature; use f32 or another"):
        compile_only(mk.tile_col, "wgsl", sig, features=[])


def test_a_fragment_statement_in_a_device_function_is_refused() -> None:
    with pytest.raises(DslError, match="fragments live in the kernel body") as info:
        mk.fragment_statement_in_a_function.specialize([K.ArrayDesc(F32, 1)], {}, "cpu")
    assert info.value.lineno == marker_line(mk.fill_in_a_function, "IN_FUNC")


def test_a_fragment_dimension_known_only_at_run_time_is_refused() -> None:
    with pytest.raises(DslError, match="m, n and k are compile-time ints") as info:
        mk.runtime_dimension.specialize(
            [K.ArrayDesc(F32, 1), K.ScalarDesc(dtypes.uint32)], {}, "cpu"
        )
    assert info.value.lineno == marker_line(mk.runtime_dimension, "RUNTIME")


def test_a_shared_array_sized_at_launch_is_refused() -> None:
    descs = [K.ArrayDesc(F32, 1), K.ScalarDesc(dtypes.uint32)]
    with pytest.raises(DslError, match="sized at launch") as info:
        mk.load_of_dynamic_shared.specialize(descs, {}, "cpu")
    assert info.value.lineno == marker_line(mk.load_of_dynamic_shared, "DYNAMIC")


def test_cuda_aligns_the_shared_arrays_of_fragments_to_32_bytes() -> None:
    source = generate(specs()[1]).source  # tile_row_shared: fragments of two shared arrays
    assert source.count("__shared__ __align__(32)") == 2


def test_a_non_compact_matrix_is_refused() -> None:
    with pytest.raises(DslError, match="non-compact view"):
        mk.load_of_a_matrix.specialize([K.ArrayDesc(F32, 2, compact=False)], {}, "cpu")


# ------------------------------------------------------------ CUDA C


def specs() -> list[K.Specialization]:
    one = [K.ArrayDesc(F32, 1), K.ArrayDesc(F16, 1), K.ArrayDesc(F16, 1)]
    return [
        mk.tile_col.specialize([*one, K.ScalarDesc(dtypes.uint32)], {}, "cuda", ("sm_90",)),
        *(
            mk.tile_row_shared.specialize(one, {"m": m, "n": n}, "cuda", ("sm_90",))
            for m, n, _k in ir.SHAPES
        ),
        mk.fill_and_store.specialize([K.ArrayDesc(F32, 1), K.ScalarDesc(F32)], {}, "cuda"),
        mk.store_beside_atomics.specialize([K.ArrayDesc(F32, 1)] * 2, {}, "cuda", ("sm_90",)),
        *(
            gemm.gemm_f16.specialize(
                [K.ArrayDesc(F32, 2), K.ArrayDesc(F16, 2), K.ArrayDesc(F16, 2)],
                {"step": step},
                "cuda",
                ("sm_90",),
            )
            for step in gemm.STEPS
        ),
        mk.tile_mma.specialize(one, {"la": 24}, "cuda", ("sm_90",)),
        gemm_mma.mma_gemm.specialize(
            [K.ArrayDesc(F32, 2), K.ArrayDesc(F16, 2), K.ArrayDesc(F16, 2)], {}, "cuda", ("sm_90",)
        ),
    ]


@pytest.mark.parametrize("index", range(11))
def test_the_cuda_c_is_ptx_and_compiles_for_sm90(index: int) -> None:
    """wmma for the wmma shapes, ``mma.sync`` for m16n8k16 (``ldmatrix`` from shared memory);
    a shared array's fragments are addressed in the shared window."""
    spec = specs()[index]
    source = generate(spec).source
    mma = any(t.shape == ir.MMA_SHAPE for _, t in spec.ir.fragments)
    assert ("mma.sync.aligned.m16n8k16.row.col" if mma else "wmma.") in source
    assert "#include" not in source
    if spec.ir.shared:
        assert (".shared.b16" if mma else ".shared.f16") in source
        assert "__cvta_generic_to_shared" in source
    assert compile_sm90(source) > 0


def test_m16n8k16_loads_from_shared_memory_are_ldmatrix_transposed_where_the_layout_says() -> None:
    source = generate(specs()[9]).source  # tile_mma: a column-major, b row-major
    assert source.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 2  # a
    assert source.count("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16") == 4  # b
    assert source.count("mma.sync.aligned.m16n8k16") == 4


def test_cuda_refuses_m16n8k16_fragments_before_ampere() -> None:
    one = [K.ArrayDesc(F32, 1), K.ArrayDesc(F16, 1), K.ArrayDesc(F16, 1)]
    spec = mk.tile_mma.specialize(one, {"la": 24}, "cuda", ("sm_75",))
    with pytest.raises(UnsupportedError, match=r"compute capability 8\.0 .* m16n16k16") as info:
        generate(spec)
    assert info.value.feature == "m16n8k16 fragments before sm_80"


def test_cuda_refuses_fragments_before_tensor_cores() -> None:
    spec = mk.fill_and_store.specialize(
        [K.ArrayDesc(F32, 1), K.ScalarDesc(F32)], {}, "cuda", ("sm_61",)
    )
    with pytest.raises(UnsupportedError, match=r"compute capability 7\.0") as info:
        generate(spec)
    assert info.value.feature == "matrix fragments before sm_70"
