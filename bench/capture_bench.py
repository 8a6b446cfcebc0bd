"""Capture's bench rows (``tenferro_host.benchmarks.capture``): replays of captured sessions
against eager calls and, on CUDA, cuda.core's graph of the same kernels.

    python bench/capture_bench.py [--backend cuda|webgpu|cpu] [--rounds 7] [--json PATH]
"""

from __future__ import annotations

import sys

from tenferro_host.benchmarks.capture import main

if __name__ == "__main__":
    sys.exit(main())
