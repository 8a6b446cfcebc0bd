"""With only the WebGPU provider in use, no CUDA library is loaded (docs/contract.md).

Checked in a fresh interpreter after running a kernel on WebGPU: ``sys.modules`` holds no
``cuda``/``cupy`` module and the process maps no libcuda, libcudart or libnvrtc.
"""

from __future__ import annotations

import sys

import pytest
from support import TESTS
from support.subprocesses import Subprocess

SCRIPT = """
import json, sys
import numpy as np
import tenferro_host as tf
from support import kernels

host = tf.Host()
rt = host.backend("webgpu")
x = rt.upload(np.arange(1000, dtype=np.float32))
with rt.session() as s, tf.webgpu.exec_session(s).jit("tests.no_cuda") as js:
    out = js.alloc_output("float32", (1000,))
    js.launch(kernels.add, js.cube_count_1d(1000), js.cube_dim_1d(), out, x, x)
ok = bool((out.download() == 2 * np.arange(1000)).all())
modules = sorted(m for m in sys.modules if m.split(".")[0] in ("cuda", "cupy"))
maps = open("/proc/self/maps").read()
libs = sorted(lib for lib in ("libcuda.", "libcudart", "libnvrtc") if lib in maps)
print(json.dumps({"ok": ok, "modules": modules, "libs": libs}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_running_a_kernel_on_webgpu_loads_no_cuda_library(
    webgpu_host: object, subproc: Subprocess
) -> None:
    found = subproc.json(SCRIPT, (TESTS,))
    assert found == {"ok": True, "modules": [], "libs": []}
