"""Host-owned tensors and their views.

A :class:`Tensor` is storage (owned by one allocation domain) plus dtype, shape, strides and
offset in elements. Owned tensors are compact column-major with offset 0; views made by
``permute``, ``transpose`` and basic slicing share storage and may be non-compact.

>>> import numpy as np, tenferro_host as tf
>>> cpu = tf.Host().backend("cpu")
>>> t = cpu.upload(np.arange(6, dtype=np.float32).reshape(2, 3))
>>> t.strides, t.is_compact()
((1, 2), True)
>>> v = t.transpose()
>>> v.shape, v.is_compact()
((3, 2), False)
>>> v.download().tolist()
[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import layout
from .dtypes import DType
from .errors import ShapeError, ValidationError

if TYPE_CHECKING:
    from .provider._runtime import Runtime
    from .provider._storage import Storage


@dataclass(frozen=True)
class Placement:
    """Where a tensor lives: the runtime's full name and its device."""

    backend: str
    device: object


class Tensor:
    """A typed, strided view of host-managed storage."""

    __slots__ = ("__weakref__", "_compact", "dtype", "offset", "shape", "storage", "strides")

    def __init__(
        self,
        storage: Storage,
        dtype: DType,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offset: int = 0,
        compact: bool | None = None,
    ) -> None:
        self.storage = storage
        self.dtype = dtype
        self.shape = shape
        self.strides = strides
        self.offset = offset
        #: is_compact(), once known (a tensor's layout never changes): sessions ask per borrow
        self._compact = compact

    # -- metadata -----------------------------------------------------------------------------
    @property
    def backend(self) -> Runtime:
        """The runtime whose allocation domain owns the storage."""
        return self.storage.runtime

    @property
    def placement(self) -> Placement:
        """The backend and device holding the storage."""
        rt = self.storage.runtime
        return Placement(rt.name, rt.device)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def numel(self) -> int:
        """Number of elements (``layout.numel``, without its frame: ops ask for it per call)."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Size of the elements in bytes (of this view, not of its storage)."""
        return self.numel * self.dtype.itemsize

    def is_compact(self) -> bool:
        """Column-major dense strides (size-1 dimensions ignored)."""
        compact = self._compact
        if compact is None:
            compact = self._compact = layout.is_compact(self.shape, self.strides)
        return compact

    def span(self) -> tuple[int, int]:
        """Half-open range of storage elements this view touches."""
        return layout.span(self.shape, self.strides, self.offset)

    # -- views --------------------------------------------------------------------------------
    def permute(self, *axes: int) -> Tensor:
        """A view with the axes reordered (``axes`` is a permutation of ``range(ndim)``)."""
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if not all(_is_int(a) for a in axes) or sorted(axes) != list(range(self.ndim)):
            raise ShapeError(
                f"permute needs a permutation of {tuple(range(self.ndim))}, got {axes}",
                argument="axes",
            )
        return Tensor(
            self.storage,
            self.dtype,
            tuple(self.shape[int(a)] for a in axes),
            tuple(self.strides[int(a)] for a in axes),
            self.offset,
        )

    def transpose(self) -> Tensor:
        """All axes reversed, as numpy's ``transpose()``."""
        return self.permute(*reversed(range(self.ndim)))

    @property
    def T(self) -> Tensor:  # noqa: N802 - numpy's name
        """All axes reversed, as numpy's ``T``."""
        return self.transpose()

    def __getitem__(self, key: Any) -> Tensor:
        """Basic slicing: integers, slices (any step) and one Ellipsis."""
        if not isinstance(key, tuple):
            key = (key,)
        ellipses = [at for at, k in enumerate(key) if k is Ellipsis]
        if len(ellipses) > 1:
            raise ValidationError("an index may hold at most one '...'", argument="key")
        if ellipses:
            at = ellipses[0]
            fill = self.ndim - (len(key) - 1)
            key = key[:at] + (slice(None),) * fill + key[at + 1 :]
        if len(key) > self.ndim:
            raise ShapeError(
                f"too many indices: {len(key)} for a tensor of {self.ndim} dimensions",
                argument="key",
            )
        key = key + (slice(None),) * (self.ndim - len(key))
        offset = self.offset
        shape: list[int] = []
        strides: list[int] = []
        for k, dim, stride in zip(key, self.shape, self.strides, strict=True):
            if isinstance(k, slice):
                start, stop, step = _slice_indices(k, dim)
                n = len(range(start, stop, step))
                if n:
                    offset += start * stride
                shape.append(n)
                # A dimension of at most one element never steps; keeping its stride keeps a
                # huge step (t[::2**62]) from overflowing the byte strides of a download.
                strides.append(stride * step if n > 1 else stride)
            elif _is_int(k):
                i = int(k) + dim if k < 0 else int(k)
                if not 0 <= i < dim:
                    raise ShapeError(
                        f"index {int(k)} is out of range for a dimension of size {dim}",
                        argument="key",
                    )
                offset += i * stride
            else:
                raise ValidationError(
                    f"unsupported index {k!r}: use integers, slices or '...' (basic slicing)",
                    argument="key",
                )
        return Tensor(self.storage, self.dtype, tuple(shape), tuple(strides), offset)

    # -- data movement (explicit only) -----------------------------------------------------------
    def download(self) -> np.ndarray:
        """Copy to a new numpy array; on a GPU this waits for the runtime's stream."""
        return self.storage.runtime.download(self)

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        runtime = self.storage.runtime
        capture = runtime.active_capture
        if capture is not None:
            raise capture.refuse(
                "a DLPack export (its consumer could read it before the captured work ran)",
                "export it after the capture's block",
            )
        return runtime.export_dlpack(self, stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.storage.runtime.dlpack_device()

    def __repr__(self) -> str:
        return (
            f"Tensor({self.dtype.name}, shape={self.shape}, strides={self.strides}, "
            f"offset={self.offset}, backend={self.storage.runtime.name!r})"
        )


def _is_int(value: Any) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _slice_indices(k: slice, dim: int) -> tuple[int, int, int]:
    """``k.indices(dim)`` for integer (or None) bounds and a non-zero step, else ValidationError."""
    if not all(b is None or _is_int(b) for b in (k.start, k.stop, k.step)):
        raise ValidationError(
            f"slice {k!r} has a bound that is not an integer; use integers or None",
            argument="key",
        )
    if k.step is not None and k.step == 0:
        raise ValidationError(f"slice {k!r} has step 0; use a non-zero step", argument="key")
    return k.indices(dim)


__all__ = ["Placement", "Tensor"]
