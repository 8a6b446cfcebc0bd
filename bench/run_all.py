"""The whole benchmark suite, as ``tenferro-host bench`` runs it (for ``scripts/gpu-tests``).

    python bench/run_all.py [--quick] [--report PATH] [--json PATH] [--only GROUP]

Writes the markdown report (default docs/performance.md), its JSON and PNG chart beside it.
"""

from __future__ import annotations

import sys

from tenferro_host._cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
