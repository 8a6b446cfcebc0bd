"""tenferro_host_linalg: linear algebra on the public seam — the worked foreign-library op package.

Built-in, but registered and built exactly like a third-party package (entry point ``linalg``
in the group ``tenferro_host``), importing only the host's public API. Ops (``specs.py``):
``linalg.matmul``, ``linalg.batched_matmul``, ``linalg.tensordot``, ``linalg.einsum``,
``linalg.sum``, ``linalg.norm``, ``linalg.qr`` and ``linalg.svd``, each with a numpy reference,
a ``cpu`` variant, a ``cuda-raw`` variant (cuBLAS/cuSOLVER through CuPy on the session's
stream; CuPy is optional, its absence an ``UnsupportedError`` with the reason) and, for the
GEMMs, reductions and the contractions lowered onto them, a ``dsl`` variant (WebGPU).

>>> import numpy as np, tenferro_host as tf
>>> host = tf.Host(); cpu = host.backend("cpu")
>>> a = cpu.upload(np.arange(6.0).reshape(2, 3))
>>> host.run("linalg.matmul", a, a.T).download().tolist()
[[5.0, 14.0], [14.0, 50.0]]
"""

from __future__ import annotations

from typing import Any

import tenferro_host

from .contraction import einsum_chain
from .cupy_bridge import cupy_missing_reason
from .specs import OPS, TOLERANCES, tolerance

TENFERRO_HOST_API = (1, 0)


@tenferro_host.hookimpl
def tenferro_host_register(registry: Any) -> None:
    """Declare every ``linalg`` op."""
    for spec in OPS:
        registry.add_op(spec)


__all__ = [
    "OPS",
    "TENFERRO_HOST_API",
    "TOLERANCES",
    "cupy_missing_reason",
    "einsum_chain",
    "tenferro_host_register",
    "tolerance",
]
