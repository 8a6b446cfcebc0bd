"""Constructs outside the DSL's language are DslErrors at the file, line and column of the
construct, saying what to write instead."""

from __future__ import annotations

import numpy as np
import pytest
from support import unsupported_constructs as vr
from support.source_marks import marker_line

from tenferro_host import dtypes
from tenferro_host import kernel as K
from tenferro_host.errors import DslError


def _specialize(kern: K.Kernel, dtype: object) -> None:
    kern.specialize([K.ArrayDesc(dtypes.dtype(np.dtype(dtype)), 1)], {}, "cpu")


CASES = [
    (vr.shared_in_branch, "shared-in-branch", "at the top level of the kernel body"),
    (vr.shared_runtime_size, "shared-size", "positive compile-time int"),
    (vr.shared_of_bool, "shared-bool", "shared arrays of bool are not supported"),
    (vr.calls_declares_shared, "shared-in-func", "declare shared arrays in the kernel"),
    (vr.barrier_as_value, "barrier-value", "statement of its own"),
    (vr.shared_as_value, "shared-value", "declares a cube's shared array"),
    (vr.atomic_on_f16, "atomic-f16", "atomics need i32, u32 or f32"),
    (vr.two_indices_on_a_vector, "too-many-indices", "2 indices given but 'out' has 1"),
    (vr.assign_over_shared, "assign-shared", "'s' is an array"),
    (vr.reserved_local, "reserved", "reserved for inlined device functions"),
    (vr.calls_forever, "recursion", r"calls itself \(forever -> forever\): recursion"),
    (vr.calls_ping, "mutual", "ping -> pong -> ping"),
    (vr.call_in_while, "while-call", "cannot be called in a while condition"),
    (vr.uses_nothing, "no-value", "returns no value"),
    (vr.wrong_arity, "arity", "takes 2 positional argument"),
    (vr.array_for_scalar, "array-for-scalar", "pass an element, not the array"),
    (vr.loop_over_shared_name, "loop-shadow", "shadows a parameter or an array"),
]


@pytest.mark.parametrize("kern,mark,message", CASES, ids=[c[1] for c in CASES])
def test_refused_construct_is_located(kern: K.Kernel, mark: str, message: str) -> None:
    dtype = {
        "atomic-f16": np.float16,
        "recursion": np.int32,
        "mutual": np.int32,
        "while-call": np.uint32,
    }.get(mark, np.float32)
    with pytest.raises(DslError, match=message) as info:
        _specialize(kern, dtype)
    assert info.value.filename.endswith("unsupported_constructs.py")
    assert info.value.lineno == marker_line(vr, f"# MARK {mark}")
    assert info.value.col_offset is not None


def test_device_function_signature_is_checked_at_decoration() -> None:
    with pytest.raises(DslError, match="plain positional parameters"):

        @K.func
        def with_default(x, y=1):
            return x


def test_device_functions_never_run_in_python() -> None:
    with pytest.raises(DslError, match="runs only inside kernels"):
        vr.small(1)
