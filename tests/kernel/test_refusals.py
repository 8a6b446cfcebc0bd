"""Wrong kernels and wrong launches: each one a located DslError or a typed launch error that
says what to do (never a raw OverflowError, RecursionError, KeyError or numpy ValueError)."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import numpy as np
import pytest
from support.dsl_harness import launch, specialize
from support.source_marks import marker_position
from test_frontend import assert_dsl_error

import tenferro_host as tf
from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.errors import DslError, ValidationError

f32 = np.zeros(4, np.float32)

# ------------------------------------------------------------ constant folding


@K.kernel
def pow_overflow(out: K.Array[K.f32]):
    out[0] = 10.0**400.0  # ERR


@K.kernel
def pow_domain(out: K.Array[K.f32]):
    out[0] = (-8.0) ** 0.5  # ERR


@K.kernel
def mod_inf(out: K.Array[K.f32]):
    out[0] = 1e309 % 2.0  # ERR


@K.kernel
def floordiv_inf(out: K.Array[K.f32]):
    out[0] = 1e309 // 2.0  # ERR


@pytest.mark.parametrize(
    "kern,marker",
    [
        (pow_overflow, "10.0**400.0"),
        (pow_domain, "(-8.0) ** 0.5"),
        (mod_inf, "1e309 % 2.0"),
        (floordiv_inf, "1e309 // 2.0"),
    ],
)
def test_literal_folding_without_a_real_value_is_located(kern, marker):
    assert_dsl_error(kern, marker, "has no finite real value", f32)


@K.kernel
def int_div_by_constant_zero(out: K.Array[K.i32]):
    out[0] = K.i32(7) // K.i32(0)  # ERR


def test_integer_division_by_a_constant_zero_is_located():
    assert_dsl_error(
        int_div_by_constant_zero, "K.i32(7) // K.i32(0)", "constant zero", np.zeros(1, np.int32)
    )


# ------------------------------------------------------------ literal types


@K.kernel
def range_float_stop(out: K.Array[K.f32]):
    for _j in range(2.5):  # ERR
        out[0] = 1.0


@K.kernel
def range_float_step(out: K.Array[K.f32]):
    for _j in range(0, 10, 0.5):  # ERR
        out[0] = 1.0


def test_range_of_a_float_literal_is_located():
    assert_dsl_error(range_float_stop, "2.5", "range needs integers, not the float 2.5", f32)
    assert_dsl_error(range_float_step, "0.5", "range needs integers, not the float 0.5", f32)


@K.kernel
def select_mixed_literals(out: K.Array[K.f32], n: K.u32):
    i = K.ABSOLUTE_POS
    y = K.select(i < n, 1, 2.5)
    if i < out.len:
        out[i] = y


def test_select_of_an_int_and_a_float_literal_is_f32():
    spec = specialize(select_mixed_literals, f32, 2)
    assert dict(spec.ir.locals)["y"] is dtypes.float32
    out = np.zeros(4, np.float32)
    launch(select_mixed_literals, 4, out, 2)
    assert out.tolist() == [1.0, 1.0, 2.5, 2.5]


@K.kernel
def huge_const_int(out: K.Array[K.f32], big: K.Const[int]):
    out[0] = out[0] * big  # ERR


def test_int_constant_too_large_for_a_float_is_located():
    assert_dsl_error(
        huge_const_int, "out[0] * big", "too large for any float type", f32, big=10**400
    )


# ------------------------------------------------------------ nesting depth


def _kernel_module(tmp_path: Path, body: str):
    """Import a kernel module written to ``tmp_path`` (kernel source must live in a file)."""
    path = tmp_path / "deep_kernels.py"
    path.write_text("from tenferro_host import kernel as K\n\n" + textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location("deep_kernels", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_deep_sum_is_located_and_long_and_chain_is_balanced(tmp_path):
    terms = " + ".join(["x[i]"] * 500)
    conds = " and ".join(["i < n"] * 1000)
    m = _kernel_module(
        tmp_path,
        f"""
        @K.kernel
        def deep(out: K.Array[K.f32], x: K.Array[K.f32]):
            i = K.ABSOLUTE_POS
            if i < out.len:
                out[i] = {terms}

        @K.kernel
        def longand(out: K.Array[K.f32], x: K.Array[K.f32], n: K.u32):
            i = K.ABSOLUTE_POS
            if i < out.len:
                out[i] = K.select({conds}, x[i], 0.0)
        """,
    )
    with pytest.raises(DslError, match="nests more than 100 operations deep") as info:
        specialize(m.deep, f32, f32)
    assert info.value.filename == m.__file__ and info.value.lineno == 8  # the out[i] = line
    out, x = np.zeros(4, np.float32), np.arange(4, dtype=np.float32)
    launch(m.longand, 4, out, x, 2)
    assert out.tolist() == [0.0, 1.0, 0.0, 0.0]


# ------------------------------------------------------------ decoration


def test_cache_size_is_validated_at_decoration():
    def body(out: K.Array[K.f32]):
        out[0] = 1.0

    for bad in (-1, 0, "a", True, 2.0):
        with pytest.raises(ValidationError, match="needs an int >= 1"):
            K.kernel(cache_size=bad)(body)
    assert K.kernel(cache_size=1)(body).cache_info().maxsize == 1


def test_array_of_a_numpy_dtype_is_located(tmp_path):
    # postponed annotations (this file): evaluated by the front-end, located at the annotation
    with pytest.raises(DslError, match="the element type must be a K scalar type") as info:

        @K.kernel
        def k(out: K.Array[np.float32]):  # ERR
            pass

    err = info.value
    assert err.filename == __file__
    assert (err.lineno, err.col_offset) == marker_position(
        test_array_of_a_numpy_dtype_is_located, "K.Array[np.float32]"
    )
    # eager annotations: evaluated when the def runs, located at the expression
    with pytest.raises(DslError, match="the element type must be a K scalar type") as info:
        _kernel_module(
            tmp_path,
            """
            import numpy as np

            @K.kernel
            def k(out: K.Array[np.float32]):
                pass
            """,
        )
    err = info.value
    assert (Path(err.filename).name, err.lineno, err.col_offset) == ("deep_kernels.py", 7, 11)


@K.kernel
def helper(out: K.Array[K.f32]):
    out[0] = 1.0


@K.kernel
def calls_helper(out: K.Array[K.f32]):
    helper(out)  # ERR


@K.kernel
def prints(out: K.Array[K.f32]):
    print(out[0])  # ERR


@K.kernel
def sqrt_statement(out: K.Array[K.f32]):
    K.sqrt(out[0])  # ERR


def test_a_call_statement_says_calling_is_not_supported():
    assert_dsl_error(calls_helper, "helper(out)", "calling helper is not supported", f32)
    assert_dsl_error(prints, "print(out[0])", "calling print is not supported", f32)
    assert_dsl_error(sqrt_statement, "K.sqrt(out[0])", "has no effect", f32)


# ------------------------------------------------------------ globals

SCALE = 2.0


@K.kernel
def scaled(out: K.Array[K.f32]):
    out[0] = SCALE * 1.0
    out[1] = DEFINED_AFTER * 1.0


DEFINED_AFTER = 3.0


def test_globals_are_read_when_a_specialization_is_made(monkeypatch):
    out = np.zeros(2, np.float32)
    monkeypatch.setitem(globals(), "SCALE", 5.0)  # changed after decoration, before launch
    scaled.cache_clear()
    launch(scaled, 1, out)
    assert out.tolist() == [5.0, 3.0]
    monkeypatch.setitem(globals(), "SCALE", 7.0)
    launch(scaled, 1, out)  # cached specialization: the value it was made with
    assert out.tolist() == [5.0, 3.0]
    scaled.cache_clear()
    launch(scaled, 1, out)
    assert out.tolist() == [7.0, 3.0]


# ------------------------------------------------------------ launch arguments


@K.kernel
def scale_by(out: K.Array[K.f32], a: K.f32, c: K.Const[float] = 1.0):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = a * c


def test_huge_ints_for_float_scalars_and_constants_are_validation_errors():
    cpu = tf.Host().backend("cpu")
    out = cpu.zeros("float32", 2)
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.refusals") as js:
        with pytest.raises(ValidationError, match="too large for any float") as info:
            js.launch(scale_by, 1, 2, out, 10**400)
        assert info.value.argument == "a"
        with pytest.raises(ValidationError, match="too large for any float") as info:
            js.launch(scale_by, 1, 2, out, 1.0, c=10**400)
        assert info.value.argument == "c"
        js.launch(scale_by, 1, 2, out, 10**38, c=10)
    assert out.download().tolist() == [np.inf] * 2  # 1e39 overflows f32 to inf, as IEEE


@K.kernel
def fill(out: K.Array[K.f32], x: K.Array[K.f32]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] + 1.0


def test_a_read_only_import_is_refused_as_a_written_binding():
    cpu = tf.Host().backend("cpu")
    ro = np.zeros(4, np.float32)
    ro.setflags(write=False)
    t = cpu.from_dlpack(ro)
    out = cpu.zeros("float32", 4)
    with cpu.session() as s, tf.cpu.exec_session(s).jit("tests.refusals") as js:
        with pytest.raises(ValidationError, match="writes 'out', but that tensor is read-only"):
            js.launch(fill, 1, 4, t, out)
        js.launch(fill, 1, 4, out, t)  # reading it is fine
        copy = cpu.canonicalize(t)  # what the error suggests
        js.launch(fill, 1, 4, copy, out)
    assert out.download().tolist() == [1.0] * 4 and copy.download().tolist() == [2.0] * 4


@K.kernel
def typed_const(out: K.Array[K.f32], c: K.Const[K.f32]):
    out[0] = c


def test_a_huge_int_for_a_typed_float_constant_is_a_validation_error():
    with pytest.raises(ValidationError, match="got an int of 401 digits") as info:
        specialize(typed_const, f32, c=10**400)
    assert info.value.argument == "c"
