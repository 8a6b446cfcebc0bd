"""The WebGPU exec session: the execution authority of a WebGPU backend session (DSL kernels
only; the base refuses ``ex.raw``)."""

from __future__ import annotations

from tenferro_host.provider import ExecSession

from .device import WebGpuDeviceInfo


class WebGpuExecSession(ExecSession):
    """The execution authority on a WebGPU runtime: DSL kernels only (``ex.jit``).

    ``ex.raw(...)`` raises UnsupportedError: WebGPU has no native modules, streams or pointers.
    """

    @property
    def device_info(self) -> WebGpuDeviceInfo:
        info = self.runtime.device_info
        assert isinstance(info, WebGpuDeviceInfo)
        return info


__all__ = ["WebGpuExecSession"]
