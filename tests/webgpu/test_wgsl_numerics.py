"""The generated WGSL's numeric safeguards, checked on the source: the loop canary only where a
kernel loops, its binding writable; constant operands hidden from WGSL constant evaluation."""

from __future__ import annotations

from support import kernels
from support import wgpu_kernels as wk
from tenferro_host_webgpu import _wgsl as wgsl

from tenferro_host import dtypes
from tenferro_host import kernel as K

F32 = K.ArrayDesc(dtypes.float32, 1)


def test_the_loop_canary_is_generated_only_for_kernels_with_loops():
    looping = kernels.row_sums.specialize(
        [K.ArrayDesc(dtypes.float32, 1), K.ArrayDesc(dtypes.float32, 2)], {}, "webgpu"
    )
    program = wgsl.generate(looping, (64, 1, 1), (0, 1), False, loop_canary=True)
    assert program.canary and program.writable == (True, False, True)
    assert "tf_loop_canary()" in program.source and "var<storage, read_write> tf_diag" in (
        program.source
    )
    straight = kernels.add.specialize([F32, F32, F32], {}, "webgpu")
    for canary in (True, False):
        program = wgsl.generate(straight, (64, 1, 1), (0, 1, 2), False, loop_canary=canary)
        assert not program.canary and "tf_diag" not in program.source
    program = wgsl.generate(looping, (64, 1, 1), (0, 1), False)
    assert not program.canary and "tf_diag" not in program.source


def test_constant_operands_are_hidden_from_constant_evaluation():
    spec = wk.constant_overflow.specialize([F32], {}, "webgpu")
    source = wgsl.generate(spec, (64, 1, 1), (0,), False).source
    line = next(t for t in source.splitlines() if "10.0f" in t)
    assert "^ tf_zero0" in line and "^ tf_zero1" in line  # both operands of the product
