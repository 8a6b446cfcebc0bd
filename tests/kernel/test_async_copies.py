# ruff: noqa: F841 - kernels below assign locals only to be refused
"""Asynchronous copies (``K.copy_async``, ``K.commit_copies``, ``K.wait_copies``): a
double-buffered sum in the interpreter, each step of the handshake left out (a planted bug the
interpreter reports at its line, as ``UnwaitedCopyError`` or a race), the front-end's
refusals, and the CUDA C generator (``cp.async``, compiled by NVRTC for sm_90)."""

from __future__ import annotations

import numpy as np
import pytest
from support import copy_kernels as ck
from support.dsl_harness import desc
from support.nvrtc_compile import ptx_sm90, ptxas_report
from support.source_marks import marker_line
from support.webgpu_harness import View, on_interpreter
from test_frontend import assert_dsl_error

from tenferro_host import kernel as K
from tenferro_host.errors import ValidationError
from tenferro_host.kernel import CooperationError, SharedRaceError, UnwaitedCopyError

RNG = np.random.default_rng(39)


def expected_sums(x: np.ndarray, blocks: int) -> np.ndarray:
    per = x.reshape(blocks, ck.CUBE, 4)
    return per[:, (np.arange(ck.CUBE) + 1) % ck.CUBE, :].sum(axis=(0, 2))


@pytest.mark.parametrize("blocks", [1, 2, 5])
def test_a_double_buffered_sum_reads_what_the_copies_brought(blocks: int) -> None:
    x = RNG.standard_normal(ck.CUBE * 4 * blocks).astype(np.float32)
    out = View.compact(np.zeros(ck.CUBE, np.float32))
    (got, _) = on_interpreter(ck.staged_sums, 1, ck.CUBE, out, View.compact(x), np.uint32(blocks))
    np.testing.assert_allclose(got, expected_sums(x, blocks), rtol=1e-5, atol=1e-5)


MISUSES = [
    (ck.read_before_the_wait, "unwaited", UnwaitedCopyError, "reads element 0 of shared array"),
    (ck.waited_without_commit, "uncommitted", UnwaitedCopyError, r"line \d+\) of unit 0 still"),
    (ck.neighbour_without_barrier, "neighbour", SharedRaceError, "unit 0 reads it while unit 1"),
    (ck.overwritten_in_flight, "overwrite", UnwaitedCopyError, "writes element 0"),
]


@pytest.mark.parametrize("kern,mark,error,message", MISUSES, ids=[m[1] for m in MISUSES])
def test_a_copy_not_waited_for_is_a_located_typed_error(kern, mark, error, message) -> None:
    x = View.compact(RNG.standard_normal(4 * ck.CUBE).astype(np.float32))
    with pytest.raises(error, match=message) as info:
        on_interpreter(kern, 1, ck.CUBE, View.compact(np.zeros(ck.CUBE, np.float32)), x)
    assert isinstance(info.value, CooperationError)
    assert f"copy_kernels.py:{marker_line(ck, f'# MARK {mark}')}:" in str(info.value)


@K.kernel
def misaligned(out: K.Array[K.f32], x: K.Array[K.f32]):
    s = K.shared(K.f32, 64)
    u = K.UNIT_POS
    K.copy_async(s, u * 4 + 2, x, u * 4, 4)  # MISALIGNED
    K.commit_copies()
    K.wait_copies(0)
    out[u] = s[u * 4 + 2]


def test_a_copy_starts_at_a_multiple_of_its_count() -> None:
    x = View.compact(np.zeros(64, np.float32))
    with pytest.raises(ValidationError, match="both starts are multiples of the count"):
        on_interpreter(misaligned, 1, 8, View.compact(np.zeros(8, np.float32)), x)


# ------------------------------------------------------------ refusals


@K.kernel
def into_an_array(out: K.Array[K.f32], x: K.Array[K.f32]):
    K.copy_async(out, 0, x, 0, 4)  # ARRAY


@K.kernel
def from_shared(out: K.Array[K.f32]):
    s = K.shared(K.f32, 8)
    t = K.shared(K.f32, 8)
    K.copy_async(s, 0, t, 0, 4)  # SHARED


@K.kernel
def of_two_types(out: K.Array[K.f32], x: K.Array[K.i32]):
    s = K.shared(K.f32, 8)
    K.copy_async(s, 0, x, 0, 4)  # TYPES


@K.kernel
def of_twelve_bytes(out: K.Array[K.f32], x: K.Array[K.f32]):
    s = K.shared(K.f32, 8)
    K.copy_async(s, 0, x, 0, 3)  # BYTES


@K.kernel
def waits_for_a_run_time_count(out: K.Array[K.f32], n: K.u32):
    K.wait_copies(n)  # WAIT


@K.kernel
def copy_as_a_value(out: K.Array[K.f32], x: K.Array[K.f32]):
    s = K.shared(K.f32, 8)
    v = K.copy_async(s, 0, x, 0, 4)  # VALUE


def test_refusals() -> None:
    f32, i32 = np.zeros(8, np.float32), np.zeros(8, np.int32)
    assert_dsl_error(into_an_array, "out, 0, x", "not a shared array", f32, f32)
    assert_dsl_error(from_shared, "t, 0, 4)  # SHARED", "no array parameter", f32)
    assert_dsl_error(of_two_types, "K.copy_async(s, 0, x, 0, 4)  # TYPES", "one type", f32, i32)
    assert_dsl_error(of_twelve_bytes, "3)  # BYTES", "4, 8 or 16 bytes", f32, f32)
    assert_dsl_error(waits_for_a_run_time_count, "K.wait_copies(n)", "compile-time", f32, 1)
    assert_dsl_error(copy_as_a_value, "K.copy_async(s, 0, x, 0, 4)  # VALUE", "no value", f32, f32)


# ------------------------------------------------------------ CUDA C (NVRTC)


def staged_sums_cuda_c() -> str:
    """The CUDA C of the double-buffered sum for sm_90."""
    from tenferro_host_cuda_jit._codegen import generate

    x = View.compact(np.zeros(64, np.float32))
    spec = ck.staged_sums.specialize([desc(x), desc(x), desc(np.uint32(3))], {}, "cuda", ("sm_90",))
    return generate(spec).source


def test_copies_compile_to_cp_async_on_sm90() -> None:
    source = staged_sums_cuda_c()
    assert "cp.async.cg.shared.global" in source and "cp.async.wait_group 1;" in source
    assert "0 bytes stack frame" in ptxas_report(source)


def test_an_aligned_copy_skips_the_element_copy_with_a_branch() -> None:
    """The misaligned fallback is a called function, so NVRTC cannot if-convert it into
    predicated loads that every aligned copy would issue too: the kernel's own body has one call
    of it per copy and no global load of the copied elements."""
    ptx = ptx_sm90(staged_sums_cuda_c())
    kernel, _, fallback = ptx.partition(".entry")[2].partition("\n.func")
    assert "copy_now" in fallback and "ld.global" in fallback
    assert "ld.global" not in kernel
    assert kernel.count("call.uni") == kernel.count("cp.async.cg.shared.global") > 0
