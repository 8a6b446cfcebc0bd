"""``bench``: the benchmark suite, every op-call figure beside its baseline."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._host import Host
from ..errors import ValidationError
from ._tables import make_table


def cmd_bench(host: Host, args: argparse.Namespace) -> int:
    """Run the benchmark suite; write the report, its JSON and chart; print the targets."""
    from ..benchmarks import run
    from ..benchmarks.cases import GROUPS

    unknown = [g for g in args.only if g not in GROUPS]
    if unknown:
        raise ValidationError(
            f"no benchmark group {unknown[0]!r}; the groups are {', '.join(GROUPS)}",
            argument="--only",
        )
    report = Path(args.report)
    outputs = [("--report", report), ("--report", report.with_suffix(".png"))]
    outputs.append(
        ("--json", Path(args.json)) if args.json else ("--report", report.with_suffix(".json"))
    )
    for option, path in outputs:
        writable_file(option, path)
    command = " ".join(
        ["tenferro-host bench"]
        + (["--quick"] if args.quick else [])
        + [f"--only {g}" for g in args.only]
        + [f"--report {args.report}"]
        + ([f"--json {args.json}"] if args.json else [])
    )
    done = run(
        quick=args.quick,
        report_path=report,
        json_path=Path(args.json) if args.json else None,
        command=command,
        only=tuple(args.only),
    )
    rows = [
        [t["target"], t["bound"], "—" if t["value"] is None else f"{t['value']:.3g}", t["verdict"]]
        for t in done["targets"]
    ]
    from rich.console import Console

    console = Console()
    console.print(make_table("targets", ["target", "bound", "measured", "verdict"], rows))
    for path in done["files"]:
        console.print(f"wrote {path}", soft_wrap=True)  # a path stays one line, to copy
    return 0


def writable_file(option: str, path: Path) -> None:
    """Refuse, before measuring anything, a ``path`` that cannot be written: its directory
    cannot be made or written, or the path is a directory."""
    import os

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = f"cannot be written: {exc.strerror or exc} ({exc.filename or path.parent})"
    else:
        if path.is_dir():
            problem = "is a directory"
        elif not os.access(path.parent, os.W_OK):
            problem = "is in a directory this user cannot write"
        else:
            return
    raise ValidationError(f"{option} {path} {problem}; pick a writable path", argument=option)


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
