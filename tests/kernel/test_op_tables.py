"""The IR names its operators once (``ir.ARITH_OPS``, ``COMPARE_OPS``, ``LOGICAL_OPS``,
``UNARY_OPS``, ``ATOMIC_OPS``); every target's operator tables are tied to those tuples here, and
one kernel using every operator lowers to IR that names exactly them and generates on each target.

A table that spells an operator the IR does not have, or misses one that a target must map
one-to-one (comparisons, logical operators), fails here.
"""

from __future__ import annotations

import numpy as np
import pytest
from tenferro_host_cuda_jit._codegen import _cuda_c
from tenferro_host_cuda_jit._codegen import _numerics as c_numerics
from tenferro_host_webgpu._wgsl import _numerics as wgsl_numerics
from tenferro_host_webgpu._wgsl import _shader as wgsl

import tenferro_host as tf
from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host._cpu._interpreter import _numerics as interpreter_numerics
from tenferro_host.kernel import ir

#: (table, the IR tuple it maps, whether it must map all of it)
TABLES = {
    "interpreter float arithmetic": (interpreter_numerics.FLOAT_OPS, ir.ARITH_OPS, True),
    "interpreter int arithmetic": (interpreter_numerics.INT_OPS, ir.ARITH_OPS, False),
    "interpreter comparisons": (interpreter_numerics.COMPARE, ir.COMPARE_OPS, True),
    "cuda arithmetic": (_cuda_c._ARITH_C, ir.ARITH_OPS, False),
    "cuda rounded arithmetic": (c_numerics.ROUNDED_OP, ir.ARITH_OPS, False),
    "cuda comparisons": (_cuda_c._COMPARE_C, ir.COMPARE_OPS, True),
    "cuda atomics": (c_numerics.NATIVE_ATOMIC, ir.ATOMIC_OPS, True),
    "wgsl arithmetic": (wgsl._BINARY, ir.ARITH_OPS, False),
    "wgsl comparisons": (wgsl._COMPARE, ir.COMPARE_OPS, True),
    "wgsl logical": (wgsl._LOGICAL, ir.LOGICAL_OPS, True),
    "wgsl f16 comparisons": (wgsl_numerics._COMPARE_OPS, ir.COMPARE_OPS, False),
}


@pytest.mark.parametrize("name", TABLES)
def test_a_target_table_names_only_ir_operators(name):
    table, ops, complete = TABLES[name]
    assert set(table) <= set(ops), f"{name}: not IR operators: {set(table) - set(ops)}"
    if complete:
        assert set(table) == set(ops), f"{name}: misses {set(ops) - set(table)}"


@K.kernel
def every_op(out: K.Array[K.F], x: K.Array[K.F], y: K.Array[K.F]):
    i = K.ABSOLUTE_POS
    if i < out.len:
        a = x[i]
        b = y[i]
        r = (a + b) - (a * b) / b + a // b + a % b + a**b
        if (a < b and a <= b) or (a > b or a >= b) or a == b or a != b:
            r = -r
        if not (a < b):
            r = r + 1.0
        out[i] = r


def _ops(body: tuple[ir.Stmt, ...], found: dict[type, set[str]]) -> None:
    for node in ir.walk(body):
        if isinstance(node, (ir.Binary, ir.Compare, ir.Logical, ir.Unary)):
            found.setdefault(type(node), set()).add(node.op)


def test_one_kernel_with_every_operator_generates_on_every_target():
    descs = [K.ArrayDesc(dtypes.float32, 1)] * 3
    found: dict[type, set[str]] = {}
    for target, features in (("cpu", ()), ("cuda", ("sm_90",)), ("webgpu", ())):
        spec = every_op.specialize(descs, {}, target, features)
        _ops(spec.ir.body, found)
        if target == "cuda":
            assert "__global__" in _cuda_c.generate(spec).source
        elif target == "webgpu":
            assert "@compute" in wgsl.generate(spec, (64, 1, 1), [0, 1, 2], folded=False).source
    assert found[ir.Binary] == set(ir.ARITH_OPS)
    assert found[ir.Compare] == set(ir.COMPARE_OPS)
    assert found[ir.Logical] == set(ir.LOGICAL_OPS)
    assert found[ir.Unary] == set(ir.UNARY_OPS)


def test_the_interpreter_runs_every_operator():
    cpu = tf.Host().backend("cpu")
    x = cpu.upload(np.array([1.5, 2.0, -3.0], np.float32))
    y = cpu.upload(np.array([2.0, 0.5, 4.0], np.float32))
    out = cpu.empty(tf.float32, (3,))
    with cpu.session() as s, s.exec_session().jit("test.every_op") as js:
        js.launch(every_op, (1, 1, 1), (4, 1, 1), out, x, y)
    assert np.isfinite(cpu.download(out)).all()
