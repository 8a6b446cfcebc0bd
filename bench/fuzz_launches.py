"""Fuzzed launches (``tests/support/launch_fuzz.py``, which the reliability tests run small):
every wrong launch is a typed error, every right one gives the right answer.

    python bench/fuzz_launches.py --backend cuda --target raw --examples 10000 [--json PATH]
    python bench/fuzz_launches.py --backend webgpu --target dsl --examples 10000
"""

from __future__ import annotations

import sys
from pathlib import Path

# The fuzzer is the tests' own (it draws its cases with Hypothesis, a test dependency).
sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from support.launch_fuzz import main

if __name__ == "__main__":
    sys.exit(main())
