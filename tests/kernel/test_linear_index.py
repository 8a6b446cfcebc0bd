"""A linear index ``x[k]`` on a view is never silent: it counts the elements of a compact view,
follows the stride of a strided 1-D view, and is refused at specialization on a non-compact view
of more dimensions (issue 25, item 4)."""

from __future__ import annotations

import numpy as np
import pytest
from support.nvrtc_compile import compile_sm90
from support.source_marks import marker_position
from support.view_kernels import accumulate_strided, double, flat_copy

import tenferro_host as tf
from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host._cpu._interpreter import ArrayArg, run
from tenferro_host.errors import DslError, ValidationError
from tenferro_host.kernel import ir

F32 = dtypes.float32


@pytest.fixture
def cpu():
    return tf.Host().backend("cpu")


def test_a_linear_index_follows_the_stride_of_a_1d_view(cpu):
    data = np.arange(20, dtype=np.float32)
    t = cpu.upload(data)
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.linear") as js:
        out = js.alloc_output("float32", (10,))
        js.launch(double, 1, 32, out, t[::2])
        js.launch(double, 1, 32, t[1::2], t[::2])  # a strided written view too
    np.testing.assert_array_equal(out.download(), 2 * data[::2])
    expected = data.copy()
    expected[1::2] = 2 * data[::2]
    np.testing.assert_array_equal(t.download(), expected)


def test_loads_stores_and_atomics_follow_the_stride_in_the_interpreter():
    storage = np.arange(12, dtype=np.float32)
    out = np.zeros(8, np.float32)
    spec = accumulate_strided.specialize(
        [K.ArrayDesc(F32, 1), K.ArrayDesc(F32, 1, compact=False)], {}, "cpu"
    )
    run(
        spec, (1, 1, 1), (4, 1, 1), [ArrayArg(out, 0, (8,), (1,)), ArrayArg(storage, 1, (4,), (3,))]
    )
    x = storage[1::3]
    np.testing.assert_array_equal(out[:2], [x[0] + x[2], x[1] + x[3]])
    np.testing.assert_array_equal(out[2:6], x)


@pytest.mark.parametrize("target", ["cpu", "cuda", "webgpu"])
def test_a_linear_index_into_a_non_compact_2d_view_is_refused_at_specialization(target):
    descs = [K.ArrayDesc(F32, 1), K.ArrayDesc(F32, 2, compact=False)]
    with pytest.raises(DslError, match=r"m\[i, j\].*canonicalize") as info:
        flat_copy.specialize(descs, {}, target)
    err = info.value
    assert "non-compact" in str(err)
    line, _ = marker_position(flat_copy, "LINEAR")
    assert err.lineno == line and err.filename == flat_copy.parsed.filename


def test_the_same_kernel_specializes_for_a_compact_2d_view(cpu):
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = cpu.upload(m)
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.linear") as js:
        out = js.alloc_output("float32", (6,))
        js.launch(flat_copy, 1, 32, out, t)  # compact: the column-major order
        with pytest.raises(DslError, match="non-compact"):
            js.launch(flat_copy, 1, 32, out, t.T)
    np.testing.assert_array_equal(out.download(), m.ravel(order="F"))


def test_a_compact_specialization_refuses_a_strided_view_in_the_interpreter():
    spec = double.specialize([K.ArrayDesc(F32, 1)] * 2, {}, "cpu")
    storage = np.zeros(8, np.float32)
    with pytest.raises(ValidationError, match="specialized for a compact view"):
        run(
            spec,
            (1, 1, 1),
            (4, 1, 1),
            [ArrayArg(storage, 0, (4,), (1,)), ArrayArg(storage, 0, (4,), (2,))],
        )


def test_compactness_is_part_of_the_specialization():
    compact = double.specialize([K.ArrayDesc(F32, 1)] * 2, {}, "cuda")
    strided = double.specialize([K.ArrayDesc(F32, 1), K.ArrayDesc(F32, 1, False)], {}, "cuda")
    assert compact.key != strided.key
    assert not any(isinstance(n, ir.ArrayStride) for n in ir.walk(compact.ir.body))
    assert any(isinstance(n, ir.ArrayStride) for n in ir.walk(strided.ir.body))


def test_a_strided_1d_view_compiles_to_cuda_through_its_stride():
    from tenferro_host_cuda_jit._codegen import generate

    spec = double.specialize(
        [K.ArrayDesc(F32, 1), K.ArrayDesc(F32, 1, False)], {}, "cuda", ("sm_90",)
    )
    source = generate(spec).source
    assert "m_stride0_x" in source.split("{", 1)[1]  # the body reads the stride
    assert compile_sm90(source) > 0
