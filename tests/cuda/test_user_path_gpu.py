"""What a new user runs first, in one fresh process, on a CUDA machine.

A raw NVRTC compile once corrupted CPython's shared one-byte object ``b" "``: the compile
succeeded, and only what came after broke (the DSL's generated source lost its spaces, torch
failed to import). So the order here is the user's: a raw compile and launch, the README's DSL
example, then importing CuPy and torch and handing them a tensor; the interpreter is checked
at the end. torch and CuPy count as absent only when they are not installed at all: one that
is installed and fails to import fails the test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.cuda_support import cuda_runtime

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

README = Path(__file__).resolve().parents[2] / "README.md"

FIRST_STEPS = textwrap.dedent(
    """
    import importlib.util, io, json, re, runpy, sys
    import numpy as np
    import tenferro_host as tf
    from tenferro_host.cuda import raw

    out = {}
    host = tf.Host()
    rt = host.backend("cuda")
    src = (
        'extern "C" __global__ void add(float* o, const float* a, const float* b, int n) '
        '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = a[i] + b[i]; }'
    )
    a = rt.upload(np.arange(1000, dtype=np.float32))
    with rt.session() as s, tf.cuda.exec_session(s).raw("first.add") as rs:
        fn = rs.compile_nvrtc(src).function("add")
        o = rs.alloc_output(tf.float32, (1000,))
        rs.launch(fn, raw.LaunchConfig.flat(1000, 128),
                  [rs.tensor_mut(o), rs.tensor(a), rs.tensor(a), raw.i32(1000)])
    out["raw"] = o.download()[:3].tolist()

    readme = open(sys.argv[1]).read()
    block = re.search(r"^```python\\n(.*?)^```$", readme, re.MULTILINE | re.DOTALL).group(1)
    example = sys.argv[2]  # a file, as a user's script is: DSL kernels need their source
    with open(example, "w") as f:
        f.write(block)
    sink = io.StringIO()
    namespace = runpy.run_path(
        example, init_globals={"print": lambda *a: print(*a, file=sink)}, run_name="readme"
    )
    out["readme_backend"] = namespace["backend"].name
    out["readme_printed"] = sink.getvalue().strip()

    t = rt.upload(np.arange(6, dtype=np.float32))
    for name in ("cupy", "torch"):
        if importlib.util.find_spec(name) is None:
            out[name] = "not installed"
            continue
        lib = __import__(name)  # an installed library that fails to import fails the test
        if name == "cupy":
            x = lib.from_dlpack(t)
            out[name] = (x + lib.ones(6, dtype=lib.float32)).get().tolist()
        else:
            x = lib.from_dlpack(t)
            out[name] = [str(x.device), (x + lib.ones(6, device=x.device)).cpu().tolist()]
    rt.synchronize()

    out["one_byte_objects"] = all(chr(c).encode()[0] == c for c in range(128))
    printed = io.BytesIO()
    text = io.TextIOWrapper(printed, encoding="utf-8", write_through=True)
    print("a", "b\\tc", file=text)  # the separator is encoded on its own: a one-byte object
    out["print_round_trip"] = list(printed.getvalue())
    print(json.dumps(out))
    """
)


def test_first_steps_in_one_process_raw_then_dsl_then_cupy_and_torch(tmp_path):
    cuda_runtime()
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_STEPS, str(README), str(tmp_path / "readme_example.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["raw"] == [0.0, 2.0, 4.0]
    assert out["readme_backend"] == "cuda:0"
    assert out["readme_printed"] == "[1. 3. 5.]"
    assert out["one_byte_objects"] is True
    assert out["print_round_trip"] == [97, 32, 98, 9, 99, 10]
    if out["cupy"] != "not installed":
        assert out["cupy"] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    if out["torch"] != "not installed":
        device, values = out["torch"]
        assert device == "cuda:0" and values == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


CLOSE_THEN_CUPY = textwrap.dedent(
    """
    import numpy as np
    import tenferro_host as tf

    rt = tf.Host().new_backend("cuda")
    rt.upload(np.ones(4, np.float32)).download()
    rt.close()  # its primary-context retain was the only one: the context is destroyed
    import cupy

    print(float(cupy.arange(4, dtype=cupy.float32).sum()))
    """
)


def test_a_closed_runtime_leaves_no_destroyed_context_current_for_cupy():
    cuda_runtime()
    pytest.importorskip("cupy")
    proc = subprocess.run(
        [sys.executable, "-c", CLOSE_THEN_CUPY], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "6.0"


CUPY_FIRST_INSIDE_A_SESSION = textwrap.dedent(
    """
    import numpy as np
    import tenferro_host as tf

    rt = tf.Host().backend("cuda")
    with rt.session() as s, tf.cuda.exec_session(s).raw("first.cupy") as rs:
        import cupy  # CuPy's first use in this process, with the primary context current

        cupy.arange(4, dtype=cupy.float32).sum()
    # the session restored "no current context", as the thread had none: CuPy rebinds its
    # device through the runtime API before the next kernel load (the documented remedy)
    cupy.cuda.Device(rt.index).use()
    print(float(cupy.arange(6, dtype=cupy.float16).sum()))
    """
)


def test_cupy_first_touched_in_a_session_works_after_it_with_the_documented_rebind():
    cuda_runtime()
    pytest.importorskip("cupy")
    proc = subprocess.run(
        [sys.executable, "-c", CUPY_FIRST_INSIDE_A_SESSION],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "15.0"
