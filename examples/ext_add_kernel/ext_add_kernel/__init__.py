"""ext_add_kernel: an example tenferro-host operation package.

It declares one operation, ``ext_add_kernel.add(lhs, rhs) -> out``, with a numpy reference and
one variant per backend family (``plugin.py`` lists them). Install it with pip and the host
finds it through its entry point; ``tenferro-host ops`` lists it.

>>> import numpy as np, tenferro_host as tf
>>> host = tf.Host()
>>> cpu = host.backend("cpu")
>>> a = cpu.upload(np.array([1.0, 2.0], dtype=np.float32))
>>> host.run("ext_add_kernel.add", a, a).download().tolist()
[2.0, 4.0]
"""

from __future__ import annotations

from tenferro_host import DTypeError, ShapeError, Tensor

OP_NAME = "ext_add_kernel.add"
#: The element types every variant accepts.
DTYPES = ("float32", "float64", "float16", "int32", "uint32", "int64")


def check_operands(lhs: Tensor, rhs: Tensor) -> None:
    """Shared validation of every variant: one accepted dtype, equal shapes.

    >>> import numpy as np, tenferro_host as tf
    >>> cpu = tf.Host().backend("cpu")
    >>> try:
    ...     check_operands(cpu.zeros("float32", (2,)), cpu.zeros("float32", (3,)))
    ... except tf.ShapeError as exc:
    ...     print(exc.argument)
    rhs
    """
    if lhs.dtype != rhs.dtype:
        raise DTypeError(
            f"lhs is {lhs.dtype.name} but rhs is {rhs.dtype.name}; pass tensors of one dtype",
            argument="rhs",
            op=OP_NAME,
        )
    if lhs.dtype.name not in DTYPES:
        raise DTypeError(
            f"{lhs.dtype.name} is not supported; use one of {', '.join(DTYPES)}",
            argument="lhs",
            op=OP_NAME,
        )
    if lhs.shape != rhs.shape:
        raise ShapeError(
            f"lhs has shape {lhs.shape} but rhs has shape {rhs.shape}; "
            "pass tensors of the same shape",
            argument="rhs",
            op=OP_NAME,
        )


__all__ = ["DTYPES", "OP_NAME", "check_operands"]
