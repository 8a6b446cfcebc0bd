"""CPU facade (PEP 562): names resolve from the built-in CPU backend on first use.

The CPU backend is a plugin like the others (it imports the host through its fronts), so this
facade names it lazily as the CUDA and WebGPU facades name theirs.

>>> import tenferro_host as tf
>>> with tf.Host().backend("cpu").session() as s:
...     tf.cpu.exec_session(s) is not None, tf.cuda.exec_session(s)
(True, None)
"""

from __future__ import annotations

from .facade import lazy_names
from .provider._exec_session import exec_session_for

_LAZY = {
    "CpuRuntime": "tenferro_host._cpu",
    "CpuDeviceInfo": "tenferro_host._cpu",
}


#: The CPU exec session of a backend session, or None if it is not a CPU session.
exec_session = exec_session_for("cpu")
__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = ["exec_session", *_LAZY]
