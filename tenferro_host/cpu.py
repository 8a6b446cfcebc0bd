"""CPU facade: public types and entry functions of the CPU backend.

>>> import tenferro_host as tf
>>> with tf.Host().backend("cpu").session() as s:
...     tf.cpu.exec_session(s) is not None, tf.cuda.exec_session(s)
(True, None)
"""

from __future__ import annotations

from typing import Any

from ._cpu import CpuDeviceInfo, CpuRuntime
from .provider._exec_session import ExecSession, exec_session_of


def exec_session(session: Any) -> ExecSession | None:
    """The CPU exec session of a backend session, or None if it is not a CPU session."""
    return exec_session_of(session, "cpu")


__all__ = ["CpuDeviceInfo", "CpuRuntime", "exec_session"]
