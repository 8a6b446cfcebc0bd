"""Every op the project ships, exported to torch (opcheck) and JAX (eager, jit, vmap).

The cuda cases skip without a GPU; on a machine with torch and JAX built for CUDA they run the
cuda-raw variants on torch's and XLA's streams.
"""

from __future__ import annotations

from tenferro_host.testing.frameworks import frameworks_test

test_add = frameworks_test("ext_add_kernel.add")
test_linalg = frameworks_test(
    "linalg.matmul", "linalg.batched_matmul", "linalg.norm", "linalg.qr", "linalg.svd"
)
test_linalg_sum = frameworks_test("linalg.sum")
test_linalg_sum_axis = frameworks_test("linalg.sum", axis=(0,))
test_linalg_tensordot = frameworks_test("linalg.tensordot", axes=1)
test_linalg_einsum = frameworks_test("linalg.einsum", spec="ij,jk->ki")
