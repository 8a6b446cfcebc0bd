"""Every linalg op against its numpy reference on every backend of this machine (check_op).

CPU runs every dtype the op accepts; CUDA (cuBLAS/cuSOLVER through CuPy) every dtype too;
WebGPU runs the ops with a ``dsl`` variant in float32 (the dtype WebGPU stores). Inputs are
the kit's random inputs, one shape for all operands, so the cases pick shapes and attributes
where that shape fits (square matrices, matching contracted sizes).
"""

from __future__ import annotations

import numpy as np
import pytest
from tenferro_host_linalg import cupy_missing_reason, tolerance

import tenferro_host as tf
from tenferro_host.testing import check_op

#: (op, shape of every input, attributes)
CASES = [
    ("linalg.matmul", (7, 7), {}),
    ("linalg.batched_matmul", (5, 5, 3), {}),
    ("linalg.batched_matmul", (4, 4, 2, 3), {}),
    ("linalg.tensordot", (4, 3, 4), {"axes": 1}),
    ("linalg.tensordot", (4, 3, 4), {"axes": 0}),
    ("linalg.tensordot", (4, 3, 4), {"axes": ((0, 1), (2, 1))}),
    ("linalg.einsum", (4, 3, 4), {"spec": "ijk,kjl->li"}),
    ("linalg.einsum", (4, 3, 5), {"spec": "ijb,kjb->kib"}),
    ("linalg.einsum", (3, 4), {"spec": "ij,kj->"}),
    ("linalg.einsum", (3, 4), {"spec": "ij,kl->ik"}),
    ("linalg.sum", (4, 3, 5), {"axis": (0, 2)}),
    ("linalg.sum", (4, 3, 5), {"axis": -2}),
    ("linalg.sum", (4, 3, 5), {}),
    ("linalg.norm", (6, 5), {}),
    ("linalg.qr", (6, 6), {}),
    ("linalg.svd", (6, 6), {}),
]


def _id(case):
    op, shape, attrs = case
    return f"{op.split('.')[1]}-{'x'.join(map(str, shape))}-{attrs}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_op_matches_reference(host, backend_name, case):
    op, shape, attrs = case
    spec = host.registry.op(op).spec
    kind = host.variants_by_backend(op).get(backend_name)
    if kind is None:  # the factorizations have no DSL variant: a typed refusal on WebGPU
        assert backend_name != "cpu" and "dsl" not in spec.variants
        x = host.backend(backend_name).upload(np.eye(shape[0], dtype=np.float32))
        with pytest.raises(tf.UnsupportedError, match="has no variant for backend") as info:
            host.run(op, x)
        assert info.value.feature == "variant"
        return
    if kind == "cuda-raw" and cupy_missing_reason() is not None:
        pytest.skip(cupy_missing_reason())
    dtypes = ("float32",) if kind == "dsl" else spec.signature.dtypes
    for dt in dtypes:
        rtol, atol = tolerance(op, dt)
        outs = check_op(
            host, op, backend_name, shape=shape, dtype=dt, attrs=attrs, rtol=rtol, atol=atol
        )
        assert len(outs) == len(spec.signature.outputs)
