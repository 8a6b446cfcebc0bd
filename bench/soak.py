"""Soak (``tenferro_host.benchmarks.soak``): a million launches with module and tensor churn
stay within bounded memory; sessions from several threads on two runtimes.

    python bench/soak.py [--launches 1000000] [--batch 1000] [--sessions 10000] [--json PATH]
    python bench/soak.py --launches 0 --backend webgpu   # part 2 only, on another backend
"""

from __future__ import annotations

import sys

from tenferro_host.benchmarks.soak import main

if __name__ == "__main__":
    sys.exit(main())
