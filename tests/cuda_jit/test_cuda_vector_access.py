"""``K.load4``/``K.store4`` through the CUDA JIT session: an aligned view takes the 16-byte
path, a view starting off a 16-byte boundary the scalar one, a strided view its stride; all
give numpy's result (fake raw seam on CPU, and a GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from support import vector_kernels as vk
from support.cuda_jit_harness import Target

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("offset", [0, 1, 4])
def test_scale4_at_aligned_and_unaligned_offsets(target: Target, offset: int) -> None:
    storage = RNG.standard_normal(1024 + 8).astype(np.float32)
    t = target.rt.upload(storage)
    with target.jit() as js:
        out = js.alloc_output("float32", (1024,))
        js.launch(vk.scale4, 4, 64, out, t[offset : offset + 1024], np.float32(2))
        got = out.download()
    np.testing.assert_array_equal(got, np.float32(2) * storage[offset : offset + 1024])


def test_sum4_through_a_stride_and_shared_vectors(target: Target) -> None:
    storage = RNG.standard_normal(512).astype(np.float32)
    x = np.arange(256, dtype=np.int32)
    with target.jit() as js:
        out = js.alloc_output("float32", (32,))
        js.launch(vk.sum4, 1, 32, out, target.rt.upload(storage)[::4])
        rev = js.alloc_output("int32", (256,))
        js.launch(vk.reverse4_through_shared, 2, 32, rev, target.rt.upload(x))
        got, reversed4 = out.download(), rev.download()
    v = storage[::4].reshape(32, 4)
    np.testing.assert_array_equal(got, (v[:, 0] + v[:, 1]) + (v[:, 2] + v[:, 3]))
    np.testing.assert_array_equal(reversed4, x.reshape(-1, 4)[:, ::-1].reshape(-1))
