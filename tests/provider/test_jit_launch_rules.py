"""What a JIT session's launch refuses, on every backend (``each_rt``): a cube that is no cube
of at most the backend's threads, a scalar that does not convert to its parameter's type, a view
with a negative stride (the error names the fix: canonicalize it)."""

from __future__ import annotations

import numpy as np
import pytest
from support import kernels
from support import wgpu_kernels as wk

import tenferro_host as tf


@pytest.mark.parametrize("dim", [-1, (1, 2, 3, 4), 2.5, (4096, 1, 1), (32, 32, 2)])
def test_bad_cube_dims_are_refused(each_rt, dim):
    x = each_rt.upload(np.ones(4, np.float32))
    with each_rt.session() as s, s.exec_session().jit("tests.dim") as js:
        with pytest.raises(tf.InvalidLaunchConfigError):
            js.launch(kernels.add, 1, dim, x, x, x)


@pytest.mark.parametrize("scalar", ["2", 1.5, 2**40, True])
def test_scalars_are_converted_or_refused(each_rt, scalar):
    x = each_rt.upload(np.ones(4, np.int32))
    with each_rt.session() as s, s.exec_session().jit("tests.scalar") as js:
        with pytest.raises(tf.ValidationError):
            js.launch(wk.control, 1, 4, x, scalar, np.int32(1), False)


def test_negative_strides_are_refused_with_the_fix(each_rt):
    x = each_rt.upload(np.arange(4, dtype=np.float32))
    with each_rt.session() as s, s.exec_session().jit("tests.neg") as js:
        with pytest.raises(tf.UnsupportedError, match="canonicalize"):
            js.launch(kernels.add, 1, 4, x, x[::-1], x)
