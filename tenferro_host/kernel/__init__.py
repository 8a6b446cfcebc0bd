"""The portable kernel DSL (SPEC section 7): ``from tenferro_host import kernel as K``.

>>> from tenferro_host import kernel as K
>>> K.Array[K.F]
K.Array[K.F]

A kernel is a Python function decorated with ``@K.kernel``; its body is parsed from the source
file into a typed IR (never executed by Python) and run by the CPU interpreter or compiled to
CUDA C / WGSL. See :mod:`tenferro_host.kernel.frontend` for the typing rules.
"""

from .frontend import DeviceFunction
from .interpreter import (
    CooperationError,
    DivergentBarrierError,
    SharedRaceError,
    UnwrittenSharedReadError,
)
from .kernel import ArrayDesc, CacheInfo, Kernel, ScalarDesc, Specialization, func, kernel
from .lang import (
    ABSOLUTE_POS,
    ABSOLUTE_POS_X,
    ABSOLUTE_POS_Y,
    ABSOLUTE_POS_Z,
    CUBE_COUNT,
    CUBE_COUNT_X,
    CUBE_COUNT_Y,
    CUBE_COUNT_Z,
    CUBE_DIM,
    CUBE_DIM_X,
    CUBE_DIM_Y,
    CUBE_DIM_Z,
    CUBE_POS,
    CUBE_POS_X,
    CUBE_POS_Y,
    CUBE_POS_Z,
    UNIT_POS,
    UNIT_POS_X,
    UNIT_POS_Y,
    UNIT_POS_Z,
    Array,
    Const,
    F,
    I,
    abs,
    atomic_add,
    atomic_compare_exchange,
    atomic_exchange,
    atomic_max,
    atomic_min,
    bool_,
    ceil,
    cos,
    exp,
    f16,
    f32,
    f64,
    floor,
    fma,
    i32,
    i64,
    log,
    max,
    min,
    select,
    shared,
    sin,
    sqrt,
    sync_cube,
    tanh,
    u32,
)

__all__ = [
    "ABSOLUTE_POS", "ABSOLUTE_POS_X", "ABSOLUTE_POS_Y", "ABSOLUTE_POS_Z",
    "CUBE_COUNT", "CUBE_COUNT_X", "CUBE_COUNT_Y", "CUBE_COUNT_Z",
    "CUBE_DIM", "CUBE_DIM_X", "CUBE_DIM_Y", "CUBE_DIM_Z",
    "CUBE_POS", "CUBE_POS_X", "CUBE_POS_Y", "CUBE_POS_Z",
    "UNIT_POS", "UNIT_POS_X", "UNIT_POS_Y", "UNIT_POS_Z",
    "Array", "ArrayDesc", "CacheInfo", "Const", "CooperationError", "DeviceFunction",
    "DivergentBarrierError", "F", "I", "Kernel", "ScalarDesc", "SharedRaceError",
    "UnwrittenSharedReadError", "Specialization", "abs", "atomic_add", "atomic_compare_exchange",
    "atomic_exchange", "atomic_max", "atomic_min", "bool_", "ceil", "cos", "exp", "f16", "f32",
    "f64", "floor", "fma", "func", "i32", "i64", "kernel", "log", "max", "min", "select",
    "shared", "sin", "sqrt", "sync_cube", "tanh", "u32",
]
