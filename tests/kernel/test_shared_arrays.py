"""Shared arrays sized at launch (``K.shared(T, n)``, ``n`` a scalar parameter) and shared arrays
of more than one dimension (``K.shared(T, (d0, d1))``, column-major) in the interpreter, the
front-end and the CUDA C generator (compiled by NVRTC, no GPU needed); the interpreter's budget
of shared memory per cube (``ir.CUBE_SHARED_BYTES``), checked before it allocates."""

from __future__ import annotations

import numpy as np
import pytest
from support import shared_kernels as sk
from support.nvrtc_compile import compile_sm90
from support.webgpu_harness import View, on_interpreter
from test_frontend import assert_dsl_error

import tenferro_host as tf
from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.errors import InvalidLaunchConfigError, UnsupportedError, ValidationError
from tenferro_host.kernel import ir

RNG = np.random.default_rng(26)
F32 = dtypes.float32


@pytest.mark.parametrize("n", [1, 32, 128])
def test_a_dynamic_shared_array_takes_its_size_from_the_launch(n: int) -> None:
    x = RNG.standard_normal(5 * n - 3).astype(np.float32)
    out = np.zeros(5, np.float32)
    (got, _) = on_interpreter(
        sk.dynamic_block_sum, 5, n, View.compact(out), View.compact(x), np.uint32(n)
    )
    padded = np.concatenate([x, np.zeros(3, np.float32)]).reshape(5, n)
    np.testing.assert_allclose(got, padded.sum(axis=1), rtol=1e-5)


def test_two_dynamic_arrays_and_a_static_one() -> None:
    n, m = 8, 3
    (got,) = on_interpreter(sk.two_dynamic, 2, n, View.compact(np.zeros(16, np.float32)), n, m)
    u = np.arange(16) % n
    np.testing.assert_array_equal(got, ((u + 1) % n) * 2.0 + (u % m) * 3 + (u % 4) * 100)


def test_a_dynamic_array_is_bounded_by_its_launch_size() -> None:
    out = View.compact(np.zeros(8, np.float32))
    with pytest.raises(
        ValidationError, match=r"index 4 of shared array 's' is out of bounds \(it has 4"
    ):
        on_interpreter(sk.dynamic_out_of_bounds, 1, 8, out, np.uint32(4))


@pytest.mark.parametrize("n", [0, -1])
def test_a_dynamic_size_below_one_is_refused(n: int) -> None:
    cpu = tf.Host().backend("cpu")
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.shared") as js:
        out = js.alloc_output("float32", (16,))
        with pytest.raises(InvalidLaunchConfigError, match="sized by 'm'"):
            js.launch(sk.two_dynamic, 2, 8, out, 8, n)


@K.kernel
def dynamic_copy(out: K.Array[K.f32], x: K.Array[K.f32], n: K.u32):
    s = K.shared(K.f32, n)
    u = K.UNIT_POS
    s[u] = x[u]
    K.sync_cube()
    out[u] = s[u]


@K.kernel
def static_copy(out: K.Array[K.f32], x: K.Array[K.f32], N: K.Const[int]):  # noqa: N803
    s = K.shared(K.f32, N)
    u = K.UNIT_POS
    s[u] = x[u]
    K.sync_cube()
    out[u] = s[u]


#: f32 elements of the shared memory the CPU interpreter grants a cube
ELEMENTS = ir.CUBE_SHARED_BYTES // 4


def test_a_dynamic_array_beyond_the_cpu_budget_is_refused_before_it_is_allocated() -> None:
    cpu = tf.Host().backend("cpu")
    x = cpu.upload(RNG.standard_normal(32).astype(np.float32))
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.shared") as js:
        out = js.alloc_output("float32", (32,))
        js.launch(dynamic_copy, 1, 32, out, x, ELEMENTS)
        np.testing.assert_array_equal(out.download(), x.download())
        for n in (ELEMENTS + 1, 2 * ELEMENTS):
            with pytest.raises(UnsupportedError) as info:
                js.launch(dynamic_copy, 1, 32, out, x, n)
            nbytes = 16 * -(-4 * n // 16)  # CUDA's layout: 16-byte aligned dynamic arrays
            message = str(info.value)
            assert f"'dynamic_copy' declares {nbytes} bytes of shared arrays" in message
            assert f"grants {ir.CUBE_SHARED_BYTES} bytes of shared memory per cube" in message


def test_static_and_dynamic_arrays_share_the_budget_on_every_interpreter_run() -> None:
    x = View.compact(np.zeros(32, np.float32))
    out = View.compact(np.zeros(16, np.float32))
    on_interpreter(static_copy, 1, 32, x, x, N=ELEMENTS)
    with pytest.raises(UnsupportedError, match=f"{4 * ELEMENTS + 4} bytes of shared arrays"):
        on_interpreter(static_copy, 1, 32, x, x, N=ELEMENTS + 1)
    # two_dynamic: 4 static f32 (16 bytes), m i32 then n = 16 f32 (64 bytes) sized at launch
    m = ELEMENTS - 20
    on_interpreter(sk.two_dynamic, 1, 16, out, np.uint32(16), np.int32(m))
    with pytest.raises(UnsupportedError, match=f"{ir.CUBE_SHARED_BYTES + 16} bytes"):
        on_interpreter(sk.two_dynamic, 1, 16, out, np.uint32(16), np.int32(m + 1))


def test_a_dynamic_array_through_the_cpu_jit_session() -> None:
    cpu = tf.Host().backend("cpu")
    x = RNG.standard_normal(256).astype(np.float32)
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.shared") as js:
        out = js.alloc_output("float32", (4,))
        js.launch(sk.dynamic_block_sum, 4, 64, out, cpu.upload(x), np.uint32(64))
    np.testing.assert_allclose(out.download(), x.reshape(4, 64).sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("shape", [(8, 8), (13, 21), (1, 9), (17, 1)])
def test_a_two_dimensional_shared_tile_transposes(shape: tuple[int, int]) -> None:
    m = RNG.standard_normal(shape)
    out = np.zeros(shape[::-1])
    count = (-(-shape[0] // sk.TILE), -(-shape[1] // sk.TILE))
    (got, _) = on_interpreter(
        sk.tile_transpose, count, (sk.TILE, sk.TILE), View.compact(out), View.compact(m)
    )
    np.testing.assert_array_equal(got.reshape(shape[::-1], order="F"), m.T)


def test_the_facts_of_a_three_dimensional_shared_array() -> None:
    (got,) = on_interpreter(sk.tile_facts, 1, 1, View.compact(np.zeros(7, np.uint32)))
    np.testing.assert_array_equal(got, [30, 2, 3, 5, 1, 2, 6])


def test_the_ir_records_shape_and_size_parameter() -> None:
    spec = sk.two_dynamic.specialize([K.ArrayDesc(F32, 1), K.ScalarDesc(), K.ScalarDesc()])
    a, b, c = spec.ir.shared
    assert (a.size_param, b.size_param, c.size_param) == ("m", "n", None)
    assert spec.ir.dynamic_shared == (a, b)
    # a's 3 i32 take 12 bytes, padded to 16: b starts aligned for 16-byte accesses
    assert ir.dynamic_shared_layout(spec.ir, (3, 8)) == ((0, 16), 48)
    tile = sk.tile_transpose.specialize([K.ArrayDesc(F32, 2)] * 2).ir.shared[0]
    assert (tile.shape, tile.size) == ((sk.TILE, sk.TILE + 1), sk.TILE * (sk.TILE + 1))


@K.kernel
def shared_sized_by_a_float(out: K.Array[K.f32], f: K.f32):
    s = K.shared(K.f32, f)  # FLOAT
    s[0] = f
    out[0] = s[0]


@K.kernel
def shared_of_two_runtime_dims(out: K.Array[K.f32], n: K.u32):
    s = K.shared(K.f32, (n, 4))  # TWO
    s[0, 0] = 1.0
    out[0] = s[0, 0]


@K.kernel
def shared_indexed_with_too_many(out: K.Array[K.f32]):
    s = K.shared(K.f32, (4, 4))
    s[0, 1, 2] = 1.0  # THREE
    out[0] = s[0]


@K.kernel
def shared_sized_by_a_local(out: K.Array[K.f32]):
    k = 4
    s = K.shared(K.f32, k)  # LOCAL
    s[0] = 1.0
    out[0] = s[0]


def test_refusals() -> None:
    f32 = np.zeros(1, np.float32)
    assert_dsl_error(
        shared_sized_by_a_float, "f)  # FLOAT", "integer scalar parameter", f32, np.float32(1)
    )
    assert_dsl_error(
        shared_of_two_runtime_dims, "n, 4)", "sized at launch has one dimension", f32, np.uint32(2)
    )
    assert_dsl_error(shared_indexed_with_too_many, "0, 1, 2]", "has 2 dimension", f32)
    assert_dsl_error(shared_sized_by_a_local, "k)  # LOCAL", "runtime integer parameter", f32)


def test_cuda_c_of_dynamic_and_two_dimensional_shared_arrays_compiles() -> None:
    from tenferro_host_cuda_jit._codegen import generate

    for kern, descs in [
        (sk.two_dynamic, [K.ArrayDesc(F32, 1), K.ScalarDesc(), K.ScalarDesc()]),
        (sk.dynamic_block_sum, [K.ArrayDesc(F32, 1)] * 2 + [K.ScalarDesc()]),
        (sk.tile_transpose, [K.ArrayDesc(F32, 2)] * 2),
    ]:
        source = generate(kern.specialize(descs, {}, "cuda", ("sm_90",))).source
        assert compile_sm90(source) > 0, kern.name
    source = generate(
        sk.two_dynamic.specialize(
            [K.ArrayDesc(F32, 1), K.ScalarDesc(), K.ScalarDesc()], {}, "cuda", ("sm_90",)
        )
    ).source
    assert "extern __shared__" in source
