"""compute-sanitizer over the CUDA tests: memcheck on the CUDA suite, racecheck on a subset.

Runs ``compute-sanitizer --tool TOOL --target-processes all`` around ``python -m pytest`` with
the selection of ``--suite`` (or pytest arguments after ``--``), so kernels launched by test
subprocesses are checked too. The tests that fault on purpose (an illegal address in debug
mode) are left out, since the sanitizer reports exactly what they do, and so is filling the
device to out of memory. Prints the sanitizer's error
summary and exits non-zero when it found an error or the tests failed; with ``$OUT`` set the
full log goes to ``$OUT/sanitize-TOOL.log``. Driver calls that return an error on purpose are
not counted (``--report-api-errors no``): the host finds a kernel's parameter count by asking
``cuKernelGetParamInfo`` for one past the last (CUDA_ERROR_INVALID_VALUE), and tests load bad
PTX and look up missing symbols to check the typed errors.

    python bench/sanitize.py --tool memcheck --suite cuda     # raw | cuda | jit | reliability
    python bench/sanitize.py --tool racecheck --suite raw
    python bench/sanitize.py --tool memcheck -- tests/cuda/test_raw_gpu.py -k add
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: Deliberate faults (the sanitizer would report them) and filling the device to out of memory
#: (the sanitizer's own allocations change where that happens) are deselected.
DESELECT = "not faulting and not out_of_memory"
#: Each runs well inside the device tool's 10 minutes under memcheck; run them one by one.
SUITES = {
    "raw": ["tests/cuda/test_raw_gpu.py", "tests/cuda/test_raw_strided_mut_gpu.py"],
    "cuda": ["tests/cuda", "-m", "cuda"],
    "jit": ["tests/cuda_jit", "-m", "cuda"],
    "reliability": ["tests/reliability", "-m", "cuda"],
}
CANDIDATES = ("/usr/local/cuda/bin/compute-sanitizer", "/opt/cuda/bin/compute-sanitizer")


def sanitizer() -> str:
    """The compute-sanitizer executable, or exit saying where it was looked for."""
    found = shutil.which("compute-sanitizer") or next(
        (c for c in CANDIDATES if os.access(c, os.X_OK)), None
    )
    if found is None:
        sys.exit(f"compute-sanitizer not found on PATH or in {', '.join(CANDIDATES)}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool", choices=["memcheck", "racecheck", "initcheck", "synccheck"])
    parser.add_argument("--suite", choices=list(SUITES), default="raw")
    parser.add_argument("--test-timeout", type=int, default=600, help="seconds per test")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest arguments instead")
    args = parser.parse_args()
    selection = args.pytest_args or [*SUITES[args.suite], "-k", DESELECT]
    command = [
        sanitizer(), "--tool", args.tool or "memcheck", "--target-processes", "all",
        "--error-exitcode", "86", "--print-limit", "50", "--report-api-errors", "no",
        sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
        "-o", "testpaths=tests", "-o", f"timeout={args.test_timeout}", *selection,
    ]  # fmt: skip
    print("running:", " ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    log = done.stdout + done.stderr
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], f"sanitize-{args.tool or 'memcheck'}.log").write_text(log)
    summaries = re.findall(r"=+ ERROR SUMMARY: .*", log)
    tail = [line for line in log.splitlines() if re.search(r"passed|failed|error", line)][-3:]
    found = sorted(set(summaries)) or ["(none)"]
    print("\n".join(["sanitizer summaries:", *found, *tail]))
    print(f"exit status {done.returncode} (86: the sanitizer found errors)")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
