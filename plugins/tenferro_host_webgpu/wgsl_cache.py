"""The persistent-cache key and entry of one WGSL specialization: the text and its bindings.

wgpu-py 0.32 cannot save a pipeline, so the kernel cache keeps what comes before it: the WGSL
generated for a specialization and launch shape, with the access mode of each storage binding
(the bind group layout the pipeline is built with). A hit skips code generation; the shader
module and the pipeline are built in every process.

The key is the specialized IR rather than the kernel's source text: the IR is what the kernel's
and its ``K.func`` helpers' sources lower to for these dtypes, ndims and constants, including the
module-level values they read (folded at specialization, invisible in the text), and its line
numbers change with every edit of those sources. Beside it: the specialization (params,
constants, features), the launch shape, the adapter and its features, the generator's own
source and the host's version.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tenferro_host.kernel import Specialization, ir
from tenferro_host.provider import CachedKernel, KernelKey

if TYPE_CHECKING:
    from .device import WebGpuDeviceInfo

#: The modules whose code decides the generated text beside the compiler package ``_wgsl/``
#: and the IR package (which holds the emitter base, ``ir.SourceEmitter``).
_GENERATOR = ("_uniforms.py",)


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


@functools.cache
def generator_identity() -> str:
    """The host's version and a digest of the WGSL generator's modules (an edit regenerates)."""
    from tenferro_host import __version__

    here = Path(__file__).parent
    files = [here / name for name in _GENERATOR] + sorted((here / "_wgsl").glob("*.py"))
    files += sorted(Path(ir.__file__).parent.glob("*.py"))
    code = b"".join(_sha(path.read_bytes()).encode() for path in files)
    return f"tenferro-host {__version__} {_sha(code)[:16]}"


def wgsl_key(
    spec: Specialization,
    dim: tuple[int, int, int],
    groups: Sequence[int],
    folded: bool,
    canary: bool,
    device: WebGpuDeviceInfo,
    shared_sizes: tuple[int, ...] = (),
) -> KernelKey | None:
    """The key of ``wgsl.generate(spec, dim, groups, folded, canary)`` on ``device``; None when
    the generator's modules cannot be read (then nothing is cached)."""
    try:
        generator = generator_identity()
    except OSError:
        return None
    k = spec.ir
    # frozensets are sorted: their order follows the per-process string hash
    lowered = repr(
        (k.name, k.params, k.locals, k.body, sorted(k.written), k.shared, sorted(k.atomic))
    )
    parts = {
        "ir": _sha(lowered),
        "specialization": repr((spec.constants, spec.target, spec.features)),
        "launch": repr((dim, tuple(groups), folded, canary, *shared_sizes)),
        "adapter": f"{device.name} ({device.api}, {device.vendor}, {device.adapter_type})",
        "features": "shader-f16" if device.shader_f16 else "none",
        "generator": generator,
    }
    return KernelKey("wgsl", f"{k.filename}:{spec.kernel_name}", parts)


def entry(source: str, writable: tuple[bool, ...]) -> CachedKernel:
    """The cache entry of generated WGSL and its storage bindings' access modes."""
    return CachedKernel(source.encode(), {"writable": list(writable)})


def unpack(found: CachedKernel) -> tuple[str, tuple[bool, ...]] | None:
    """(WGSL, writable) of an entry; None when it does not hold them (then regenerate)."""
    writable = found.meta.get("writable")
    if not isinstance(writable, list) or not all(isinstance(w, bool) for w in writable):
        return None
    try:
        return found.payload.decode(), tuple(writable)
    except UnicodeDecodeError:
        return None


__all__ = ["entry", "generator_identity", "unpack", "wgsl_key"]
