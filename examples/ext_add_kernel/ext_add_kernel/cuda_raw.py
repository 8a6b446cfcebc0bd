"""The ``cuda-raw`` variant: the add kernel launched through the raw CUDA session.

The module comes from the fatbin that nvcc built at package build time when there was one
(see ``setup.py`` and :func:`build_info`), else from NVRTC compiling ``kernel.cu`` for the live
device. Either way it is cached per runtime with ``rs.resource``, so compiling happens once.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from tenferro_host import Tensor, UnsupportedError
from tenferro_host.cuda import raw

from . import OP_NAME, check_operands

#: One kernel per dtype in kernel.cu (``add_kernel`` is the guide's float kernel).
KERNELS = {
    "float32": "add_kernel",
    "float64": "add_float64",
    "float16": "add_float16",
    "int32": "add_int32",
    "uint32": "add_uint32",
    "int64": "add_int64",
}
BLOCK = 256
_INT_MAX = 2**31 - 1


def kernel_source() -> str:
    """The CUDA source shipped with the package."""
    return resources.files(__package__).joinpath("kernel.cu").read_text()


@cache
def build_info() -> dict[str, Any]:
    """What the build step produced (fatbin, gencode, nvcc version), or why it did not."""
    path = resources.files(__package__).joinpath("build_info.json")
    if not path.is_file():
        return {"fatbin": None, "reason": "package built without its build step (no build info)"}
    info: dict[str, Any] = json.loads(path.read_text())
    return info


def _fatbin() -> bytes | None:
    name = build_info().get("fatbin")
    if not name:
        return None
    path = resources.files(__package__).joinpath(name)
    return path.read_bytes() if path.is_file() else None


def load_module(rs: Any) -> Any:
    """The add module for this runtime: the prebuilt fatbin, else NVRTC (cached)."""

    def make() -> Any:
        image = _fatbin()
        if image is not None:
            return rs.load_cubin(image)
        return rs.compile_nvrtc(kernel_source())

    return rs.resource((OP_NAME, "module"), make)


def add(ex: Any, lhs: Tensor, rhs: Tensor) -> Tensor:
    """``out = lhs + rhs`` on a CUDA exec session; non-compact inputs are canonicalized first."""
    check_operands(lhs, rhs)
    n = lhs.numel
    if n > _INT_MAX:
        raise UnsupportedError(
            f"the add kernel indexes with int; {n} elements exceed {_INT_MAX}",
            backend=ex.runtime.name,
            feature="numel",
            op=OP_NAME,
        )
    runtime = ex.runtime
    if not lhs.is_compact():
        lhs = runtime.canonicalize(lhs)
    if not rhs.is_compact():
        rhs = runtime.canonicalize(rhs)
    with ex.raw(OP_NAME) as rs:
        out = rs.alloc_output(lhs.dtype, lhs.shape)
        if n == 0:
            return out
        function = load_module(rs).function(KERNELS[lhs.dtype.name])
        rs.launch(
            function,
            raw.LaunchConfig.flat(n, BLOCK),
            [rs.tensor_mut(out), rs.tensor(lhs), rs.tensor(rhs), raw.i32(n)],
        )
        return out


__all__ = ["BLOCK", "KERNELS", "add", "build_info", "kernel_source", "load_module"]
