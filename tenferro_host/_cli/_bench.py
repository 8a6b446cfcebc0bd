"""``bench``: the benchmark suite, every op-call figure beside its baseline."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from .._host import Host
from ..errors import ValidationError
from ._tables import make_table


def cmd_bench(host: Host, args: argparse.Namespace) -> int:
    """Run the benchmark suite; write the report, its JSON and chart; print the targets."""
    from pathlib import Path

    from ..benchmarks import run
    from ..benchmarks.cases import GROUPS

    unknown = [g for g in args.only if g not in GROUPS]
    if unknown:
        raise ValidationError(
            f"no benchmark group {unknown[0]!r}; the groups are {', '.join(GROUPS)}",
            argument="--only",
        )
    command = " ".join(
        ["tenferro-host bench"]
        + (["--quick"] if args.quick else [])
        + [f"--only {g}" for g in args.only]
        + [f"--report {args.report}"]
        + ([f"--json {args.json}"] if args.json else [])
    )
    done = run(
        quick=args.quick,
        report_path=Path(args.report),
        json_path=Path(args.json) if args.json else None,
        command=command,
        only=tuple(args.only),
    )
    rows = [
        [t["target"], t["bound"], "—" if t["value"] is None else f"{t['value']:.3g}", t["verdict"]]
        for t in done["targets"]
    ]
    console = Console()
    console.print(make_table("targets", ["target", "bound", "measured", "verdict"], rows))
    for path in done["files"]:
        console.print(f"wrote {path}")
    return 0


def add_parser(sub: Any) -> None:
    """The ``bench`` command."""
    bench = sub.add_parser(
        "bench", help="the benchmark suite: every op-call figure beside its baseline"
    )
    bench.add_argument("--quick", action="store_true", help="a short smoke run")
    bench.add_argument("--json", metavar="PATH", help="the JSON (default: beside the report)")
    bench.add_argument(
        "--report",
        default="docs/performance.md",
        metavar="PATH",
        help="the markdown report; the PNG chart goes beside it (default docs/performance.md)",
    )
    bench.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GROUP",
        help="measure only this group (cpu, webgpu, cuda, cuda-bandwidth, dsl-backends, compile)",
    )
    bench.set_defaults(func=cmd_bench, strict=False)
