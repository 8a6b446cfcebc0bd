# ruff: noqa: F841 - kernels below assign locals only to have them type-checked
"""Front-end: signature checks, type inference, generics, literal typing, located DslErrors."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from support import kernels
from support.dsl_harness import specialize
from support.source_marks import marker_position

from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.errors import DslError, DTypeError, ValidationError
from tenferro_host.kernel import ir

f32 = np.zeros(4, np.float32)
f64 = np.zeros(4, np.float64)
i32 = np.zeros(4, np.int32)
u32 = np.zeros(4, np.uint32)


def assert_dsl_error(kern: K.Kernel, marker: str, match: str, *args, **consts) -> DslError:
    with pytest.raises(DslError, match=match) as info:
        specialize(kern, *args, **consts)
    err = info.value
    source = kern.parsed.filename  # the file defining the kernel (this one, or another test's)
    assert source == inspect.getsourcefile(kern.__wrapped__)
    assert err.filename == source
    assert (err.lineno, err.col_offset) == marker_position(kern, marker), str(err)
    assert f"{source}:{err.lineno}:{err.col_offset}" in str(err)
    return err


# ------------------------------------------------------------ decorator and signature


def test_decorator_keeps_metadata_and_refuses_python_calls():
    assert kernels.saxpy.__name__ == "saxpy"
    assert kernels.saxpy.__doc__.startswith("out = a * x + y")
    assert inspect.isfunction(kernels.saxpy.__wrapped__)
    with pytest.raises(DslError, match="cannot be called from Python"):
        kernels.saxpy(1, 2, 3, 4)


def test_markers_refuse_python_use():
    with pytest.raises(DslError, match=r"only meaningful inside a @K.kernel"):
        K.sqrt(2.0)
    with pytest.raises(DslError, match="only meaningful inside"):
        K.f32(1)


def test_source_not_in_a_file_is_a_dsl_error():
    namespace = {"K": K}
    code = "def k(out: K.Array[K.F]):\n    out[0] = 1.0\n"
    exec(compile(code, "<interactive>", "exec"), namespace)
    with pytest.raises(DslError, match="kernel source must live in a file") as info:
        K.kernel(namespace["k"])
    assert info.value.filename == "<interactive>"


def test_missing_annotation_is_located():
    with pytest.raises(DslError, match="needs a kernel annotation") as info:

        @K.kernel
        def bad(out: K.Array[K.F], n):  # ERR-n
            pass

    line, _ = marker_position(test_missing_annotation_is_located, "# ERR-n")
    assert info.value.lineno == line
    assert info.value.col_offset > 0


def test_signature_errors():
    with pytest.raises(DslError, match=r"\*args"):

        @K.kernel
        def varargs(*xs: K.f32):
            pass

    with pytest.raises(DslError, match=r"only K.Const parameters may have a default"):

        @K.kernel
        def default(x: K.f32 = 1.0):
            pass

    with pytest.raises(DslError, match="returns nothing"):

        @K.kernel
        def returns(x: K.f32) -> int:
            pass

    with pytest.raises(DslError, match="element type must be a K scalar type"):
        K.Array[float]
    with pytest.raises(DslError, match="a constant is an int, float, bool"):
        K.Const[str]


# ------------------------------------------------------------ typing


def test_saxpy_ir_is_typed_from_the_arguments():
    spec = specialize(kernels.saxpy, f64, f64, f64, 2.0)
    assert [(p.name, p.kind, p.dtype, p.ndim) for p in spec.params] == [
        ("out", "array", dtypes.float64, 1),
        ("x", "array", dtypes.float64, 1),
        ("y", "array", dtypes.float64, 1),
        ("a", "scalar", dtypes.float64, None),
    ]
    assert dict(spec.ir.locals) == {"i": dtypes.uint32}
    store = spec.ir.body[1].then[0]
    assert isinstance(store, ir.Store) and store.value.type is dtypes.float64
    assert spec.ir.written == {"out"}


def test_generic_conflict_and_category_are_dtype_errors():
    with pytest.raises(DTypeError, match=r"every K.F parameter shares one dtype") as info:
        specialize(kernels.saxpy, f32, f64, f32, 1.0)
    assert info.value.argument == "x"
    with pytest.raises(DTypeError, match=r"is K.F .a float type. but got int32"):
        specialize(kernels.saxpy, i32, i32, i32, 1.0)


@K.kernel
def scalar_generic_only(out: K.Array[K.f64], a: K.F):
    out[0] = K.f64(a)


def test_generic_bound_by_a_numpy_scalar_or_unresolved():
    spec = specialize(scalar_generic_only, f64, np.float16(1))
    assert spec.params[1].dtype is dtypes.float16
    with pytest.raises(DTypeError, match=r"cannot resolve K.F"):
        specialize(scalar_generic_only, f64, 1.0)


def test_wrong_argument_kinds_are_validation_errors():
    with pytest.raises(ValidationError, match=r"is a scalar .* not a tensor"):
        specialize(kernels.saxpy, f32, f32, f32, f32)
    with pytest.raises(ValidationError, match="is an array; pass a Tensor"):
        specialize(kernels.saxpy, f32, 1.0, f32, 1.0)
    with pytest.raises(ValidationError, match="takes 4 runtime argument"):
        specialize(kernels.saxpy, f32, f32)


@K.kernel
def literal_typing(out: K.Array[K.F], n: K.Array[K.i64]):
    i = K.ABSOLUTE_POS
    a = out[i] * 2
    b = out[i] + 0.1
    c = n[i] - 1
    d = 3 // 2 + 7 % -4
    f = 2 * 0.5
    g = d - 5


def test_literal_typing_rules():
    spec = specialize(literal_typing, f32, np.zeros(4, np.int64))
    types = dict(spec.ir.locals)
    assert types == {
        "i": dtypes.uint32,
        "a": dtypes.float32,
        "b": dtypes.float32,
        "c": dtypes.int64,
        "d": dtypes.int32,
        "f": dtypes.float32,
        "g": dtypes.int32,
    }
    values = {s.name: s.value for s in spec.ir.body if isinstance(s, ir.Assign)}
    assert values["b"].rhs == ir.Const(np.float32(0.1).item(), type=dtypes.float32)
    assert values["d"] == ir.Const(1 + 3, type=dtypes.int32)  # 3//2 + 7 % -4 (C: 7 % -4 == 3)
    assert values["f"] == ir.Const(1.0, type=dtypes.float32)


@K.kernel
def negative_default(out: K.Array[K.F]):
    e = -7 // 2
    big = 3000000000 // 1  # ERR


def test_untyped_int_defaults_to_i32():
    assert_dsl_error(
        negative_default, "3000000000 // 1", r"does not fit the default i32; write K.u32", f32
    )


@K.kernel
def f64_literal(out: K.Array[K.F]):
    out[0] = out[1] * 1e-3


def test_float_literal_never_promotes_f32():
    spec = specialize(f64_literal, f32)
    assert spec.ir.body[0].value.type is dtypes.float32
    spec = specialize(f64_literal, f64)
    assert spec.ir.body[0].value.rhs == ir.Const(1e-3, type=dtypes.float64)


@K.kernel
def local_type_change(out: K.Array[K.F]):
    x = out[0]
    x = K.ABSOLUTE_POS  # ERR


def test_local_keeps_its_first_type():
    err = assert_dsl_error(
        local_type_change, "x = K.ABSOLUTE_POS", "a local keeps its first type", f32
    )
    assert "K.f32(" in str(err)


@K.kernel
def annotated_local(out: K.Array[K.F]):
    x: K.i32 = 5
    y: K.F = 1
    out[0] = y + K.F(x)


def test_annotated_locals():
    spec = specialize(annotated_local, f64)
    assert dict(spec.ir.locals) == {"x": dtypes.int32, "y": dtypes.float64}


# ------------------------------------------------------------ located errors


@K.kernel
def mixes_types(out: K.Array[K.F], n: K.Array[K.i32]):
    i = K.ABSOLUTE_POS
    j = i + n[0]  # ERR


@K.kernel
def float_literal_with_int(out: K.Array[K.i32]):
    out[0] = out[1] * 0.5  # ERR


@K.kernel
def int_true_division(out: K.Array[K.i32]):
    out[0] = out[1] / 2  # ERR


@K.kernel
def int_pow(out: K.Array[K.i32]):
    out[0] = out[1] ** 2  # ERR


@K.kernel
def unknown_call(out: K.Array[K.F]):
    out[0] = print(1)  # ERR


@K.kernel
def python_cast(out: K.Array[K.F]):
    out[0] = float(1)  # ERR


@K.kernel
def attribute_access(out: K.Array[K.F]):
    out[0] = out.size  # ERR


@K.kernel
def list_literal(out: K.Array[K.F]):
    xs = [1, 2]  # ERR


@K.kernel
def tuple_literal(out: K.Array[K.F]):
    xs = (1, 2)  # ERR


@K.kernel
def lambda_expr(out: K.Array[K.F]):
    f = lambda v: v  # ERR  # noqa: E731


@K.kernel
def with_stmt(out: K.Array[K.F]):
    with open("x"):  # ERR
        pass


@K.kernel
def try_stmt(out: K.Array[K.F]):
    try:  # ERR  # noqa: SIM105 - the refused statement under test
        pass
    except Exception:
        pass


@K.kernel
def return_value(out: K.Array[K.F]):
    return 1  # ERR


@K.kernel
def global_stmt(out: K.Array[K.F]):
    global N  # ERR


@K.kernel
def truthiness(out: K.Array[K.F]):
    if out.len:  # ERR
        pass


@K.kernel
def assign_param(out: K.Array[K.F], a: K.F):
    a = 1.0  # ERR


@K.kernel
def assign_loop_var(out: K.Array[K.F]):
    for i in range(4):
        i = 2  # ERR


@K.kernel
def non_range_loop(out: K.Array[K.F]):
    for _i in out:  # ERR
        pass


@K.kernel
def tuple_index(out: K.Array[K.F]):
    out[0, 1] = 1.0  # ERR


@K.kernel
def shape_axis_out_of_range(out: K.Array[K.F]):
    n = out.shape[1]  # ERR


@K.kernel
def shape_axis_not_constant(out: K.Array[K.F]):
    k = K.ABSOLUTE_POS
    n = out.stride[k]  # ERR


@K.kernel
def used_before_assignment(out: K.Array[K.F]):
    out[0] = y  # ERR  # noqa: F821


@K.kernel
def if_expression(out: K.Array[K.F]):
    out[0] = 1.0 if True else 2.0  # ERR


@K.kernel
def unbound_generic(out: K.Array[K.f32]):
    x = K.I(0)  # ERR


@K.kernel
def store_wrong_type(out: K.Array[K.f32], a: K.f64):
    out[0] = a  # ERR


@K.kernel
def literal_does_not_fit(out: K.Array[K.u32]):
    out[0] = out[1] * -1  # ERR


@K.kernel
def array_as_value(out: K.Array[K.F]):
    x = out  # ERR


@K.kernel
def bitwise(out: K.Array[K.u32]):
    out[0] = out[1] & 3  # ERR


@K.kernel
def bad_math_arity(out: K.Array[K.F]):
    out[0] = K.sqrt(1.0, 2.0)  # ERR


@K.kernel
def sqrt_of_int(out: K.Array[K.u32]):
    out[0] = K.sqrt(out[1])  # ERR


@K.kernel
def bool_arith(out: K.Array[K.bool_]):
    out[0] = out[1] + out[2]  # ERR


@K.kernel
def expression_statement(out: K.Array[K.F]):
    out[0] + 1.0  # ERR


@K.kernel
def chained_assign(out: K.Array[K.F]):
    a = b = 1.0  # ERR


@K.kernel
def unknown_attribute(out: K.Array[K.F]):
    out[0] = K.sqr(1.0)  # ERR


@K.kernel
def while_else(out: K.Array[K.F]):
    while False:  # ERR
        pass
    else:
        pass


ERROR_CASES = [
    (mixes_types, "i + n[0]", r"different types \(u32 and i32\) never mix", (f32, i32)),
    (float_literal_with_int, "out[1] * 0.5", "float literal 0.5 meets an integer", (i32,)),
    (int_true_division, "out[1] / 2", "'/' on integers .* use '//'", (i32,)),
    (int_pow, "out[1] ** 2", r"'\*\*' needs floats", (i32,)),
    (unknown_call, "print(1)", "calling print is not supported", (f32,)),
    (python_cast, "float(1)", r"float\(...\) is not supported; cast with K.I", (f32,)),
    (attribute_access, "out.size", r"out.size is not supported; arrays have .len", (f32,)),
    (list_literal, "[1, 2]", "lists are not supported", (f32,)),
    (tuple_literal, "(1, 2)", "tuples are not supported", (f32,)),
    (lambda_expr, "lambda v", "lambdas are not supported", (f32,)),
    (with_stmt, "with open", "'with' is not supported", (f32,)),
    (try_stmt, "try:", "'try' is not supported", (f32,)),
    (return_value, "return 1", "bare 'return'", (f32,)),
    (global_stmt, "global N", "'global' is not supported", (f32,)),
    (truthiness, "out.len", "'if' needs a bool; compare explicitly", (f32,)),
    (assign_param, "a = 1.0", "parameter 'a' is read-only", (f32, 1.0)),
    (assign_loop_var, "i = 2", "loop variable 'i' cannot be assigned", (f32,)),
    (non_range_loop, "out:  #", r"loop only over range", (f32,)),
    (tuple_index, "0, 1", "one linear index", (f32,)),
    (shape_axis_out_of_range, "1]", "axis 1 is out of range for 'out', which has 1", (f32,)),
    (shape_axis_not_constant, "k]", "must be a compile-time int", (f32,)),
    (used_before_assignment, "y  #", "'y' is used before assignment", (f32,)),
    (if_expression, "1.0 if", r"use K.select\(cond, a, b\)", (f32,)),
    (unbound_generic, "K.I(0)", "K.I is not bound in this kernel", (f32,)),
    (store_wrong_type, "out[0] = a", r"storing a f64 into 'out'.*K.f32", (f32, 1.0)),
    (literal_does_not_fit, "out[1] * -1", "the literal -1 does not fit u32", (u32,)),
    (array_as_value, "out  #", "array 'out' is used as a value", (f32,)),
    (bitwise, "out[1] & 3", "operator BitAnd is not supported", (u32,)),
    (bad_math_arity, "K.sqrt(1.0, 2.0)", r"K.sqrt takes 1 argument\(s\), got 2", (f32,)),
    (sqrt_of_int, "K.sqrt(out[1])", "K.sqrt needs a float argument, not u32", (u32,)),
    (bool_arith, "out[1] + out[2]", "arithmetic on bools", (np.zeros(4, bool),)),
    (expression_statement, "out[0] + 1.0", "has no effect", (f32,)),
    (chained_assign, "a = b", "chained assignment", (f32,)),
    (unknown_attribute, "K.sqr", "has no attribute 'sqr'", (f32,)),
    (while_else, "while False", "'while ... else' is not supported", (f32,)),
]


@pytest.mark.parametrize(
    "kern,marker,match,args", ERROR_CASES, ids=[c[0].__name__ for c in ERROR_CASES]
)
def test_dsl_error_is_located(kern, marker, match, args):
    assert_dsl_error(kern, marker, match, *args)


# ------------------------------------------------------------ constants


@K.kernel
def scaled(
    out: K.Array[K.F],
    factor: K.Const[float],
    reps: K.Const[int] = 2,
    flag: K.Const[bool] = False,
    axis: K.Const[int] = 0,
    base: K.Const[K.u32] = 1,
):
    i = K.ABSOLUTE_POS
    if flag:
        out[i] = out[i] * factor
    for _k in range(reps):
        out[i] = out[i] + 1
    out[0] = K.F(out.shape[axis] + base)


def test_constants_fold_and_key_the_cache():
    spec = specialize(scaled, f32, factor=2.5)
    assert spec.constants == (
        ("axis", 0),
        ("base", 1),
        ("factor", 2.5),
        ("flag", False),
        ("reps", 2),
    )
    assert specialize(scaled, f32, factor=2.5) is spec
    assert specialize(scaled, f32, factor=2.5, reps=3) is not spec
    assert specialize(scaled, f32, factor=2) is not spec  # int 2 vs float 2.5 differ
    assert specialize(scaled, f32, factor=2) is not specialize(scaled, f32, factor=2.0)


def test_constant_errors():
    with pytest.raises(ValidationError, match="needs the compile-time constant 'factor'"):
        specialize(scaled, f32)
    with pytest.raises(ValidationError, match="has no compile-time constant 'nope'"):
        specialize(scaled, f32, factor=1.0, nope=1)
    with pytest.raises(ValidationError, match=r"declared K.Const.int. but got 1.5"):
        specialize(scaled, f32, factor=1.0, reps=1.5)
    with pytest.raises(ValidationError, match=r"does not fit K.u32"):
        specialize(scaled, f32, factor=1.0, base=-1)
    with pytest.raises(DslError, match="axis 1 is out of range"):
        specialize(scaled, f32, factor=1.0, axis=1)
