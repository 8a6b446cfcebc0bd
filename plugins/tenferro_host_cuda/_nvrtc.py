"""Runtime compilation with NVRTC (``cuda.bindings.nvrtc``); works without a GPU.

:func:`compile_source` turns CUDA C++ into a CUBIN for one ``sm_XY`` (the default: the live
device's) or, on request, into PTX for a ``compute_XY`` virtual architecture. A failed compile
raises :class:`~tenferro_host.errors.CompileError` with NVRTC's log, the options, and the first
error's line and column.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tenferro_host import CompileError, ValidationError
from tenferro_host.provider import CompiledKernel

from ._driver import check
from ._driver import nvrtc_bindings as _nvrtc

if TYPE_CHECKING:
    from tenferro_host.provider import CachedKernel

_ARCH = re.compile(r"^(sm|compute)_(\d{2,3}[a-z]?)$")
_ERROR_AT = re.compile(r"^(?P<name>.*?)\((?P<line>\d+)\): (?:catastrophic )?error", re.MULTILINE)


@dataclass(frozen=True)
class NvrtcOptions:
    """Options of :meth:`RawSession.compile_nvrtc`; all optional.

    ``arch``: ``"sm_XY"`` (CUBIN) or ``"compute_XY"`` (PTX); None means the live device's
    ``sm_XY``. ``ptx=True`` asks for PTX of the device's ``compute_XY`` instead of CUBIN.
    ``name_expressions`` lists C++ names (templates ...) to look up by their source spelling.
    """

    arch: str | None = None
    std: str | None = None
    defines: Mapping[str, str | int | None] = field(default_factory=dict)
    include_dirs: Sequence[str] = ()
    name_expressions: Sequence[str] = ()
    lineinfo: bool = False
    extra: Sequence[str] = ()
    ptx: bool = False

    def __post_init__(self) -> None:
        if self.arch is not None and not _ARCH.match(self.arch):
            raise ValidationError(
                f"NvrtcOptions.arch {self.arch!r} is not 'sm_XY' or 'compute_XY' (e.g. 'sm_90')",
                argument="arch",
            )
        if self.ptx and self.arch is not None and self.arch.startswith("sm_"):
            raise ValidationError(
                f"ptx=True needs a virtual architecture, got arch={self.arch!r}; "
                "use 'compute_XY' or leave arch unset",
                argument="arch",
            )

    def target(self, device_arch: str | None) -> tuple[str, bool]:
        """(architecture, is_ptx) for a device of ``device_arch`` (``sm_XY``) or none."""
        arch = self.arch
        if arch is None:
            if device_arch is None:
                raise ValidationError(
                    "no live device to take the architecture from; pass NvrtcOptions(arch=...)",
                    argument="arch",
                )
            arch = device_arch.replace("sm_", "compute_") if self.ptx else device_arch
        return arch, arch.startswith("compute_")

    def flags(self, arch: str) -> list[str]:
        """NVRTC's options for ``arch``: std, defines, include dirs, line info, then ``extra``."""
        out = [f"--gpu-architecture={arch}"]
        if self.std:
            out.append(f"--std={self.std}")
        for key, value in self.defines.items():
            out.append(f"-D{key}" if value is None else f"-D{key}={value}")
        out += [f"-I{d}" for d in self.include_dirs]
        if self.lineinfo:
            out.append("--generate-line-info")
        out += list(self.extra)
        return out


@dataclass(frozen=True)
class CompiledImage:
    """What NVRTC produced: ``kind`` is "cubin" or "ptx"."""

    kind: str
    data: bytes
    arch: str
    log: str
    lowered_names: Mapping[str, str]


def _ok(result: tuple[Any, ...], what: str) -> Any:
    """The value of an NVRTC result, or BackendError naming the NVRTC code (the driver's one
    checker, :func:`._driver.check`, with NVRTC's names)."""
    return check(result, what, describe=_nvrtc_error)


def _nvrtc_error(err: Any) -> str:
    """``NVRTC_ERROR_X (code)`` for an NVRTC result code."""
    nvrtc = _nvrtc()
    code = int(err)
    try:
        _, text = nvrtc.nvrtcGetErrorString(nvrtc.nvrtcResult(code))
    except ValueError:
        return f"nvrtcResult {code}"
    name = text.decode() if isinstance(text, bytes) else str(text)
    return f"{name} ({code})"


def _read(getter: Any, prog: Any, size: int) -> bytes:
    """Let NVRTC fill a fresh writable buffer of ``size`` bytes and return an immutable copy.

    Never hand NVRTC a ``bytes`` object to write into: ``b" " * 1`` is CPython's one shared
    one-byte object, and writing into it corrupts every later one-byte ``b" "`` in the process.
    """
    buf = bytearray(max(int(size), 1))
    _ok(getter(prog, buf), getter.__name__)
    return bytes(buf)


def parse_log(log: str) -> tuple[int | None, int | None]:
    """Line and column of the first error in an NVRTC log (column from the caret line)."""
    m = _ERROR_AT.search(log)
    if m is None:
        return None, None
    line = int(m.group("line"))
    rest = log[m.end() :].splitlines()[1:4]
    column = None
    for i, text in enumerate(rest):
        if text.strip() == "^" and i > 0:
            column = text.index("^") - 1  # NVRTC indents the echoed source by 2 spaces
            break
    return line, column


def compile_source(
    source: str | bytes,
    options: NvrtcOptions | None = None,
    *,
    device_arch: str | None = None,
    name: str = "kernel.cu",
    op: str | None = None,
) -> CompiledImage:
    """Compile ``source`` to CUBIN (default) or PTX; CompileError with the log on failure.

    A compile another process (or this one) already made is loaded from the persistent kernel
    cache (:class:`tenferro_host.provider.KernelCache`); failed compiles are never stored.
    """
    opts = options or NvrtcOptions()
    if not isinstance(opts, NvrtcOptions):
        raise ValidationError(
            f"options must be NvrtcOptions, got {type(opts).__name__}", argument="options", op=op
        )
    if isinstance(source, str):
        source = source.encode()
    if not isinstance(source, bytes) or not source.strip():
        raise ValidationError("source must be non-empty CUDA C++ text", argument="source", op=op)
    arch, is_ptx = opts.target(device_arch)
    text = source

    def build() -> CompiledImage:
        return _compile(text, opts, arch, is_ptx, name, op)

    # the kernel cache and the NVRTC key load at the first compile, not with the plugin
    # (tests/cuda/test_first_call_imports.py counts what a first compile imports)
    from tenferro_host.provider import active_kernel_cache

    cache = active_kernel_cache()
    if cache is None:
        return build()
    from ._nvrtc_cache import nvrtc_key

    key = nvrtc_key(source, opts, arch, is_ptx, name)
    if key is None:
        return build()
    found = cache.load_or_build(key, lambda: _entry(build()))
    image = _image(found)
    if image is None:  # checksummed but malformed (an older build's): dropped, compiled again
        cache.reject(key, found, "its metadata lacks the image's kind, arch, log or names")
        image = _image(cache.load_or_build(key, lambda: _entry(build())))
    return image or build()


def _image(found: CachedKernel) -> CompiledImage | None:
    """The compiled image of a cache entry; None when its metadata is not an image's."""
    meta = found.meta
    names = meta.get("lowered_names")
    if meta.get("kind") not in ("cubin", "ptx") or not isinstance(names, dict):
        return None
    if not isinstance(meta.get("arch"), str) or not isinstance(meta.get("log"), str):
        return None
    return CompiledImage(meta["kind"], found.payload, meta["arch"], meta["log"], dict(names))


def _entry(image: CompiledImage) -> CachedKernel:
    """The cache entry of a compiled image: the binary, with its log and lowered names."""
    from tenferro_host.provider import CachedKernel  # the cache's module: at the first compile

    return CachedKernel(
        image.data,
        {
            "kind": image.kind,
            "arch": image.arch,
            "log": image.log,
            "lowered_names": dict(image.lowered_names),
        },
    )


def _compile(
    source: bytes, opts: NvrtcOptions, arch: str, is_ptx: bool, name: str, op: str | None
) -> CompiledImage:
    """One NVRTC run."""
    nvrtc = _nvrtc()
    flags = opts.flags(arch)
    prog = _ok(nvrtc.nvrtcCreateProgram(source, name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        for expr in opts.name_expressions:
            _ok(nvrtc.nvrtcAddNameExpression(prog, expr.encode()), "nvrtcAddNameExpression")
        encoded = [f.encode() for f in flags]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        size = _ok(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log = _read(nvrtc.nvrtcGetProgramLog, prog, size).rstrip(b"\0").decode(errors="replace")
        if int(err) != 0:
            line, column = parse_log(log)
            first = next((ln for ln in log.splitlines() if "error" in ln), log.strip()[:200])
            raise CompileError(
                f"NVRTC could not compile {name} for {arch}: {first.strip()}; "
                "see .log for the full compiler output",
                log=log,
                options=flags,
                line=line,
                column=column,
                op=op,
            )
        lowered = {}
        for expr in opts.name_expressions:
            low = _ok(nvrtc.nvrtcGetLoweredName(prog, expr.encode()), "nvrtcGetLoweredName")
            lowered[expr] = low.decode() if isinstance(low, bytes) else str(low)
        if is_ptx:
            size = _ok(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
            data = _read(nvrtc.nvrtcGetPTX, prog, size).rstrip(b"\0")
        else:
            size = _ok(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            data = _read(nvrtc.nvrtcGetCUBIN, prog, size)
        return CompiledImage("ptx" if is_ptx else "cubin", data, arch, log, lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


__all__ = ["CompiledImage", "NvrtcOptions", "compile_source", "parse_log"]


def compile_only(source: str | bytes, arch: str, name: str) -> CompiledKernel:
    """The ``cuda`` source compiler of the registry: ``source`` through NVRTC for ``arch``,
    without a device (the testing kit and the benchmarks call it through the host)."""
    image = compile_source(source, NvrtcOptions(arch=arch), name=name)
    text = source.decode() if isinstance(source, bytes) else source
    return CompiledKernel(name, "cuda", text, image.data, image.kind, arch)
