"""The ``tenferro-host`` command: what this machine offers, and a timed, checked op run.

Commands: ``caps`` (backends, devices, capabilities, plugins, ops), ``plugins``, ``ops`` and
``run OP``. Tables are for people; ``--json`` prints stable JSON for scripts and nothing else
on stdout (schema in SPEC section 11). A library error prints one line on stderr and exits 2;
a ``run --check`` mismatch exits 1.

>>> import tenferro_host as tf
>>> report = caps_report(tf.Host())
>>> report["schema_version"], "cpu" in [b["name"] for b in report["backends"]]
(1, True)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .capability import ExtensionCapability
from .errors import PluginError, TenferroError, ValidationError
from .host import Host
from .registry import BackendStatus
from .testing.checks import (
    accepted_dtype,
    as_outputs,
    compare_outputs,
    default_dtype,
    download_all,
    random_inputs,
)

SCHEMA_VERSION = 1
EXIT_CHECK_FAILED = 1
EXIT_ERROR = 2


# -- reports (plain data; the JSON output) -------------------------------------------------------
def backend_report(host: Host, status: BackendStatus) -> dict[str, Any]:
    """One backend kind as ``caps --json`` lists it; capabilities all False when unavailable."""
    caps = dict.fromkeys((c.name for c in ExtensionCapability), False)
    reason = status.reason
    if status.available:
        try:
            runtime = host.backend(f"{status.kind}:0")
            caps.update({c.name: bool(v) for c, v in runtime.capabilities().items()})
        except Exception as exc:  # a provider's bug must not take `caps` down
            reason = f"could not create a runtime: {type(exc).__name__}: {exc}"
    return {
        "name": status.kind,
        "kind": status.kind,
        "available": status.available,
        "reason": reason,
        "software": status.software,
        "devices": status.devices,
        "capabilities": caps,
    }


def plugins_report(host: Host) -> list[dict[str, Any]]:
    """Every plugin: name, distribution, version, status (loaded|error|disabled), error."""
    return [
        {"name": r.name, "dist": r.dist, "version": r.version, "status": r.status, "error": r.error}
        for r in host.plugins.records
    ]


def ops_report(host: Host, *, kernels: bool = False) -> list[dict[str, Any]]:
    """Every op: name, distribution(s), status (ok|conflict), the variant kind per backend.

    With ``kernels``, each op also lists the kernels it ships with their build info (``ops``;
    ``caps --json`` keeps exactly the schema-1 keys).
    """
    report = []
    for rec in sorted(host.registry.ops.values(), key=lambda r: r.name):
        entry: dict[str, Any] = {
            "name": rec.name,
            "dist": ", ".join(rec.conflicting) if rec.status == "conflict" else rec.dist,
            "status": rec.status,
            "variants": host.variants_by_backend(rec.name),
        }
        if kernels:
            shipped = rec.spec.kernels if rec.spec is not None else ()
            entry["kernels"] = [
                {"name": k.name, "language": k.language, "archs": list(k.archs),
                 "build_info": dict(k.build_info), "summary": k.describe()}
                for k in shipped
            ]
        report.append(entry)
    return report


def caps_report(host: Host) -> dict[str, Any]:
    """The whole ``caps --json`` document (schema version 1)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "backends": [backend_report(host, s) for s in host.backend_statuses()],
        "plugins": plugins_report(host),
        "ops": ops_report(host),
    }


# -- rendering for people ----------------------------------------------------------------------
#: Flexible columns share the terminal width in these ratios; the others fit their content.
_RATIOS = {
    "reason": 3, "error": 3, "devices": 2, "capabilities": 2, "variants": 2, "kernels": 3,
}


def _table(title: str, columns: Sequence[str], rows: list[list[Any]]) -> Table:
    table = Table(title=title, title_justify="left", expand=True)
    for column in columns:
        table.add_column(column, overflow="fold", ratio=_RATIOS.get(column))
    for row in rows:
        table.add_row(*(Text("" if v is None else str(v)) for v in row))
    return table


def _device_summary(devices: list[Any]) -> str:
    """Device names with their counts, e.g. ``2 x llvmpipe``; ``-`` for none."""
    counts: dict[str, int] = {}
    for d in devices:
        name = str(d.get("name", d)) if isinstance(d, dict) else str(d)
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} x {name}" if n > 1 else name for name, n in counts.items()) or "-"


def _backends_table(backends: list[dict[str, Any]]) -> Table:
    rows = []
    for b in backends:
        devices = _device_summary(b["devices"])
        on = ", ".join(name for name, v in b["capabilities"].items() if v) or "-"
        available = "yes" + (" (software)" if b["software"] else "") if b["available"] else "no"
        rows.append([b["name"], available, devices, on, b["reason"] or ""])
    return _table("Backends", ["name", "available", "devices", "capabilities", "reason"], rows)


def _plugins_table(plugins: list[dict[str, Any]]) -> Table:
    rows = [[p["name"], p["dist"], p["version"], p["status"], p["error"]] for p in plugins]
    return _table("Plugins", ["name", "distribution", "version", "status", "error"], rows)


def _ops_table(ops: list[dict[str, Any]]) -> Table:
    rows = []
    for o in ops:
        variants = "\n".join(f"{k}: {v}" for k, v in o["variants"].items())
        kernels = "\n".join(k["summary"] for k in o.get("kernels", ()))
        rows.append([o["name"], o["dist"], o["status"], variants, kernels])
    return _table("Operations", ["name", "distribution", "status", "variants", "kernels"], rows)


def _emit(args: argparse.Namespace, data: Any, *tables: Table) -> None:
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return
    console = Console(soft_wrap=False)
    for table in tables:
        console.print(table)


# -- commands ------------------------------------------------------------------------------------
def cmd_caps(host: Host, args: argparse.Namespace) -> int:
    report = caps_report(host)
    _emit(
        args,
        report,
        _backends_table(report["backends"]),
        _plugins_table(report["plugins"]),
        _ops_table(ops_report(host, kernels=True)),
    )
    return 0


def cmd_plugins(host: Host, args: argparse.Namespace) -> int:
    report = plugins_report(host)
    _emit(args, report, _plugins_table(report))
    return 0


def cmd_ops(host: Host, args: argparse.Namespace) -> int:
    report = ops_report(host, kernels=True)
    _emit(args, report, _ops_table(report))
    return 0


def parse_attr(text: str, attributes: dict[str, type], op: str) -> tuple[str, Any]:
    """``NAME=VALUE`` converted to the attribute's declared type.

    >>> parse_attr("factor=2.5", {"factor": float}, "my_pkg.scale")
    ('factor', 2.5)
    """
    name, sep, raw = text.partition("=")
    if not sep or name not in attributes:
        raise ValidationError(
            f"--attr {text!r}: use NAME=VALUE with NAME one of "
            f"{', '.join(sorted(attributes)) or '(op has no attributes)'}",
            argument="attr",
            op=op,
        )
    kind = attributes[name]
    try:
        if kind is bool:
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return name, raw.lower() in ("true", "1")
        return name, kind(raw)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"--attr {name}: {raw!r} is not a valid {kind.__name__}", argument="attr", op=op
        ) from exc


def cmd_run(host: Host, args: argparse.Namespace) -> int:
    spec = host.registry.op(args.op).spec
    assert spec is not None
    sig = spec.signature
    runtime = host.backend(args.backend or host.default_backend())
    dt = default_dtype(sig) if args.dtype is None else accepted_dtype(sig, args.dtype, spec.name)
    attrs = dict(parse_attr(a, dict(sig.attributes), spec.name) for a in args.attr)
    arrays = random_inputs(sig, args.shape, dt, args.seed)
    tensors = [runtime.upload(a) for a in arrays]

    got = download_all(host.run(spec.name, *tensors, **attrs))  # warm-up, and the checked result
    problem = None
    if args.check:
        expected = as_outputs(spec.reference(*arrays, **attrs))
        problem = compare_outputs(got, expected, sig.outputs)

    seconds: float | None = None
    if problem is None:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            download_all(host.run(spec.name, *tensors, **attrs))
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)

    check = "skipped" if not args.check else ("failed" if problem else "passed")
    result = {
        "op": spec.name,
        "backend": runtime.name,
        "variant": host.variants_by_backend(spec.name).get(runtime.kind),
        "dtype": dt.name,
        "shape": list(args.shape),
        "repeat": args.repeat,
        "seconds_per_run": seconds,
        "check": check,
        "mismatch": problem,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        console = Console()
        what = f"{spec.name} on {runtime.name} ({result['variant']}, {dt.name}, shape {args.shape})"
        if seconds is not None:
            console.print(
                Text(f"{what}: {seconds * 1e3:.3f} ms per run "
                     f"(median of {args.repeat}, output downloaded)")
            )
        if args.check and problem is None:
            console.print(Text("check: passed (matches the numpy reference)"))
    if problem is not None:
        print(
            f"tenferro-host: check failed: {spec.name} on {runtime.name}: {problem}",
            file=sys.stderr,
        )
        return EXIT_CHECK_FAILED
    return 0


# -- argument parsing ------------------------------------------------------------------------------
def shape_arg(text: str) -> tuple[int, ...]:
    """``1000000``, ``1000,1000`` or ``1000x1000`` as a shape tuple.

    >>> shape_arg("3x4"), shape_arg("10"), shape_arg("0")
    ((3, 4), (10,), (0,))
    """
    parts = text.replace("x", ",").split(",")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if not dims or any(d < 0 for d in dims):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a shape; write non-negative sizes like 1000000 or 1000,1000"
        )
    return dims


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def cmd_bench(host: Host, args: argparse.Namespace) -> int:
    """Run the benchmark suite; write the report, its JSON and chart; print the targets."""
    from pathlib import Path

    from .benchmarks import run
    from .benchmarks.cases import GROUPS

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
    done = run(quick=args.quick, report_path=Path(args.report),
               json_path=Path(args.json) if args.json else None, command=command,
               only=tuple(args.only))
    rows = [[t["target"], t["bound"],
             "—" if t["value"] is None else f"{t['value']:.3g}", t["verdict"]]
            for t in done["targets"]]
    console = Console()
    console.print(_table("targets", ["target", "bound", "measured", "verdict"], rows))
    for path in done["files"]:
        console.print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``tenferro-host``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--strict",
        action="store_true",
        help="make plugin failures and op name conflicts fatal (also TENFERRO_STRICT_PLUGINS=1)",
    )
    common.add_argument("--json", action="store_true", help="print JSON only, for scripts")

    parser = argparse.ArgumentParser(
        prog="tenferro-host",
        description="GPU tensor host: list backends, plugins and ops; run an op.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser(
        "caps", parents=[common], help="backends, devices, capabilities, plugins and ops"
    ).set_defaults(func=cmd_caps)
    sub.add_parser("plugins", parents=[common], help="installed plugins").set_defaults(
        func=cmd_plugins
    )
    sub.add_parser("ops", parents=[common], help="registered operations").set_defaults(
        func=cmd_ops
    )
    run = sub.add_parser(
        "run", parents=[common], help="run an op on random inputs, time it, check it"
    )
    run.add_argument("op", metavar="OP", help="operation name, e.g. ext_add_kernel.add")
    run.add_argument("--backend", help="backend name (kind[:index]); default: the best available")
    run.add_argument(
        "--shape", type=shape_arg, default=(1_000_000,), help="input shape (default 1000000)"
    )
    run.add_argument("--dtype", help="input dtype (default float32, if the op accepts it)")
    run.add_argument("--repeat", type=positive_int, default=10, help="timed runs (default 10)")
    run.add_argument("--check", action="store_true", help="compare with the numpy reference")
    run.add_argument("--seed", type=int, default=0, help="random seed of the inputs")
    run.add_argument(
        "--attr", action="append", default=[], metavar="NAME=VALUE", help="an op attribute"
    )
    run.set_defaults(func=cmd_run)
    bench = sub.add_parser(
        "bench", help="the benchmark suite: every op-call figure beside its baseline"
    )
    bench.add_argument("--quick", action="store_true", help="a short smoke run")
    bench.add_argument("--json", metavar="PATH", help="the JSON (default: beside the report)")
    bench.add_argument(
        "--report", default="docs/performance.md", metavar="PATH",
        help="the markdown report; the PNG chart goes beside it (default docs/performance.md)",
    )
    bench.add_argument(
        "--only", action="append", default=[], metavar="GROUP",
        help="measure only this group (cpu, webgpu, cuda, cuda-bandwidth, dsl-backends, compile)",
    )
    bench.set_defaults(func=cmd_bench, strict=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tenferro-host`` and ``python -m tenferro_host``; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        host = Host(strict=True if args.strict else None)
        host.plugins  # noqa: B018 - load now, so strict mode fails before any output
        return int(args.func(host, args))
    except PluginError as exc:
        print(f"tenferro-host: plugin error: {exc}", file=sys.stderr)
    except TenferroError as exc:
        print(f"tenferro-host: error: {exc}", file=sys.stderr)
    return EXIT_ERROR


__all__ = [
    "backend_report",
    "build_parser",
    "caps_report",
    "main",
    "ops_report",
    "parse_attr",
    "plugins_report",
    "shape_arg",
]
