"""Vector accesses (``K.load4``/``K.store4``): four consecutive elements in one statement; one
16-byte access on CUDA where the address is aligned (checked at run time, four scalar accesses
otherwise); through the stride on a strided 1-D view; refused on a non-compact matrix."""

from __future__ import annotations

import numpy as np
import pytest
from support import vector_kernels as vk
from support.nvrtc_compile import compile_sm90
from support.webgpu_harness import View, on_interpreter
from test_frontend import assert_dsl_error

from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.errors import ValidationError
from tenferro_host.kernel import ir

RNG = np.random.default_rng(44)
F32, I32 = dtypes.float32, dtypes.int32


def test_scale4_equals_numpy() -> None:
    x = RNG.standard_normal(64).astype(np.float32)
    (got, _) = on_interpreter(
        vk.scale4, 1, 32, View.compact(np.zeros(64, np.float32)), View.compact(x), np.float32(3)
    )
    np.testing.assert_array_equal(got, np.float32(3) * x)


def test_vector_accesses_of_a_shared_array() -> None:
    x = np.arange(256, dtype=np.int32)
    (got, _) = on_interpreter(
        vk.reverse4_through_shared, 2, 32, View.compact(np.zeros(256, np.int32)), View.compact(x)
    )
    np.testing.assert_array_equal(got, x.reshape(-1, 4)[:, ::-1].reshape(-1))


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_sum4_at_any_offset_and_through_a_stride(offset: int) -> None:
    storage = RNG.standard_normal(200).astype(np.float32)
    out = View.compact(np.zeros(8, np.float32))
    (got, _) = on_interpreter(vk.sum4, 1, 8, out, View(storage, offset, (32,), (1,)))
    x = storage[offset : offset + 32].reshape(8, 4)
    np.testing.assert_array_equal(got, (x[:, 0] + x[:, 1]) + (x[:, 2] + x[:, 3]))
    (got, _) = on_interpreter(vk.sum4, 1, 8, out, View(storage, offset, (32,), (3,)))
    x = storage[offset : offset + 96 : 3].reshape(8, 4)
    np.testing.assert_array_equal(got, (x[:, 0] + x[:, 1]) + (x[:, 2] + x[:, 3]))


def test_a_vector_access_past_the_view_is_out_of_bounds() -> None:
    out = View.compact(np.zeros(8, np.float32))
    with pytest.raises(ValidationError, match="out of bounds"):
        on_interpreter(vk.sum4, 1, 8, out, View.compact(np.zeros(30, np.float32)))


def test_the_ir_has_one_vector_node_for_contiguous_elements_only() -> None:
    compact = vk.sum4.specialize([K.ArrayDesc(F32, 1)] * 2)
    strided = vk.sum4.specialize([K.ArrayDesc(F32, 1), K.ArrayDesc(F32, 1, compact=False)])
    assert any(isinstance(n, ir.LoadVector) for n in ir.walk(compact.ir.body))
    assert not any(isinstance(n, ir.LoadVector) for n in ir.walk(strided.ir.body))
    assert any(isinstance(n, ir.ArrayStride) for n in ir.walk(strided.ir.body))


def test_refusals() -> None:
    f32 = np.zeros(4, np.float32)
    matrix = View(np.zeros(16, np.float32), 0, (4, 4), (4, 1))
    with pytest.raises(Exception, match="non-compact 2-D view"):
        on_interpreter(vk.load4_into_a_non_compact_matrix, 1, 1, View.compact(f32), matrix)
    assert_dsl_error(vk.load4_as_a_value, "out[0] = K.load4", "gives four values", f32, f32)
    assert_dsl_error(vk.load4_into_three, "a, b, c =", "gives four values", f32, f32)
    assert_dsl_error(
        vk.store4_of_a_wrong_type, "n, n, n, n)", "a i32 value where f32", f32, np.int32(1)
    )


@pytest.mark.parametrize(
    ("kern", "descs"),
    [
        (vk.scale4, [K.ArrayDesc(F32, 1)] * 2 + [K.ScalarDesc()]),
        (vk.scale4, [K.ArrayDesc(dtypes.float16, 1)] * 2 + [K.ScalarDesc()]),
        (vk.reverse4_through_shared, [K.ArrayDesc(I32, 1)] * 2),
        (vk.sum4, [K.ArrayDesc(F32, 1), K.ArrayDesc(F32, 1, compact=False)]),
    ],
)
def test_cuda_c_of_vector_accesses_compiles(kern: K.Kernel, descs: list) -> None:
    from tenferro_host_cuda_jit._codegen import generate

    source = generate(kern.specialize(descs, {}, "cuda", ("sm_90",))).source
    assert compile_sm90(source) > 0
    four_bytes = descs[0].dtype.itemsize == 4 and kern is not vk.sum4
    assert ("reinterpret_cast<const" in source) == four_bytes
