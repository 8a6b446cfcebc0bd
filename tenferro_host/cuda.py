"""CUDA facade (PEP 562): names resolve lazily from the CUDA provider plugin.

Importing this module loads no GPU library; the first access to a CUDA type does.
``exec_session`` works without the plugin: it answers None for a non-CUDA session.
"""

from __future__ import annotations

from .facade import lazy_names
from .identity import CudaDeviceId, CudaDeviceUuid
from .provider._exec_session import exec_session_for

_LAZY = {
    "CudaRuntime": "tenferro_host_cuda",
    "CudaExecSession": "tenferro_host_cuda",
    "CudaDeviceInfo": "tenferro_host_cuda",
    "copy_from_same_device": "tenferro_host_cuda",
    "copy_from_peer": "tenferro_host_cuda",
    "can_access_peer": "tenferro_host_cuda",
    "probe_p2p": "tenferro_host_cuda",
    "PeerProbe": "tenferro_host_cuda",
    "raw": "tenferro_host_cuda",
}


#: The CUDA exec session of a backend session, or None if it is not a CUDA session.
exec_session = exec_session_for("cuda")
__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = ["CudaDeviceId", "CudaDeviceUuid", "exec_session", *_LAZY]
