"""Every target walks the IR through one visitor and handles every node class of ``ir.py``.

Adding a node class to ``ir.py`` without listing it in ``ir.STATEMENTS``/``ir.EXPRESSIONS``, or
without a ``visit_<Node>`` in the interpreter, the CUDA C emitter or the WGSL emitter, fails
here (the visitor base also refuses such a target when its class is created).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from support import kernels
from tenferro_host_cuda_jit._codegen import _cuda_c
from tenferro_host_webgpu._wgsl import _shader as wgsl
from tenferro_host_webgpu._wgsl import _types as wgsl_types

from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host._cpu._interpreter import _machine
from tenferro_host.kernel import ir
from tenferro_host.kernel._lowering import _calls

TARGETS = {
    "interpreter": _machine._Machine,
    "cuda": _cuda_c._Emitter,
    "wgsl": wgsl._Emitter,
}


def _defined_in_ir(base: type) -> set[type]:
    return {
        obj
        for obj in vars(ir).values()
        if isinstance(obj, type) and issubclass(obj, base) and obj is not base
    }


def test_the_node_tuples_list_every_node_class_of_the_ir_module() -> None:
    assert set(ir.STATEMENTS) == _defined_in_ir(ir.Stmt)
    assert set(ir.EXPRESSIONS) == _defined_in_ir(ir.Expr)
    assert len(set(ir.NODES)) == len(ir.NODES) == len(ir.STATEMENTS) + len(ir.EXPRESSIONS)
    assert _defined_in_ir(ir.Node) == set(ir.NODES) | {ir.Stmt, ir.Expr}


@pytest.mark.parametrize("target", TARGETS.values(), ids=TARGETS.keys())
def test_every_target_handles_every_ir_node(target: type[ir.Visitor]) -> None:
    missing = [n.__name__ for n in ir.NODES if not callable(getattr(target, f"visit_{n.__name__}"))]
    assert not missing, f"{target.__qualname__} has no visit_ method for {missing}"
    # the table is the class's own, built once when the class was created
    assert "_handlers" in vars(target)
    assert set(target._handlers) == set(ir.NODES)
    for node, handler in target._handlers.items():
        assert handler is getattr(target, f"visit_{node.__name__}")


@pytest.mark.parametrize("target", TARGETS.values(), ids=TARGETS.keys())
def test_no_target_handles_a_node_the_ir_does_not_have(target: type[ir.Visitor]) -> None:
    names = {n.__name__ for n in ir.NODES}
    stray = [m for m in dir(target) if m.startswith("visit_") and m[6:] not in names]
    assert not stray


def test_a_visitor_missing_a_handler_is_refused_naming_the_node() -> None:
    methods = {f"visit_{n.__name__}": lambda self, node: None for n in ir.NODES}
    del methods["visit_Select"], methods["visit_Return"]
    with pytest.raises(TypeError, match=r"Partial handles no IR node Return, Select"):
        type("Partial", (ir.Visitor,), methods)
    # an abstract base may leave handlers to its subclasses
    type("Base", (ir.Visitor,), methods, abstract=True)


def test_a_new_node_class_without_handlers_is_named() -> None:
    @dataclass(frozen=True)
    class Fence(ir.Stmt):
        pass

    for target in TARGETS.values():
        with pytest.raises(TypeError, match="no IR node Fence: define visit_Fence"):
            ir.dispatch_table(target, "visit_", (*ir.NODES, Fence))


def test_dispatching_an_unknown_node_names_it() -> None:
    @dataclass(frozen=True)
    class Fence(ir.Stmt):
        pass

    methods = {f"visit_{n.__name__}": lambda self, node: "" for n in ir.NODES}
    Walk = type("Walk", (ir.Visitor,), methods)
    assert Walk().expr(ir.Var("x", type=dtypes.int32)) == ""
    with pytest.raises(TypeError, match="unknown IR statement Fence"):
        Walk().stmt(Fence())


def test_value_types_are_walked_once_per_kernel_ir() -> None:
    descs = [K.ArrayDesc(dtypes.float32, 1)] * 3 + [K.ScalarDesc()]
    spec = kernels.saxpy.specialize(descs, {}, "webgpu")
    first = wgsl_types.value_types(spec.ir)
    assert first is wgsl_types.value_types(spec.ir) is spec.ir.value_types
    assert dtypes.float32 in first


def test_one_u32_max() -> None:
    assert ir.U32_MAX == 2**32 - 1
    assert _machine.U32_MAX is ir.U32_MAX
    assert _calls.U32_MAX is ir.U32_MAX
    assert _machine.check_u32_array is ir.check_u32_array
