"""The ``tenferro-host`` command: what this machine offers, and a timed, checked op run.

Commands: ``caps`` (backends, devices, capabilities, plugins, ops), ``plugins``, ``ops``,
``run OP``, ``check DIST|OP`` (the conformance suite) and ``new-op NAME`` (a package
skeleton). Tables are for people; ``--json`` prints stable JSON for scripts and nothing else on
stdout. Exit codes: 0 success, 1 a check failed, 2 a usage or library error or a strict-mode
plugin failure (one line on stderr), 3 an op, a reference or a plugin raised.

>>> import tenferro_host as tf
>>> report = caps_report(tf.Host())
>>> report["schema_version"], "cpu" in [b["name"] for b in report["backends"]]
(1, True)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ._host import Host
from .capability import ExtensionCapability
from .errors import PluginError, TenferroError, UnsupportedError, ValidationError
from .provider.registry import BackendStatus
from .testing.checks import (
    accepted_dtype,
    as_outputs,
    compare_outputs,
    default_dtype,
    download_all,
    output_problem,
    random_inputs,
)

SCHEMA_VERSION = 1
EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_ERROR = 2
EXIT_OP_RAISED = 3


class OpRaised(Exception):  # noqa: N818 - a wrapper signal, not an error kind of its own
    """An op's variant or reference (plugin code) raised something other than a typed error."""


def call_op_code(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call plugin code; anything but a TenferroError (SystemExit included) becomes OpRaised."""
    try:
        return fn(*args, **kwargs)
    except TenferroError:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a plugin's SystemExit must not end the CLI
        raise OpRaised(
            f"{what} raised {type(exc).__name__}: {exc}; this is a bug in the op's package"
        ) from exc


# -- reports (plain data; the JSON output) -------------------------------------------------------
def backend_report(host: Host, status: BackendStatus) -> dict[str, Any]:
    """One backend kind as ``caps --json`` lists it; capabilities all False when unavailable."""
    caps = dict.fromkeys((c.name for c in ExtensionCapability), False)
    reason = status.reason
    if status.available:
        try:
            caps.update({c.name: v for c, v in host.backend_capabilities(status).items()})
        except Exception as exc:  # a provider's bug must not take `caps` down
            reason = f"could not create a runtime: {type(exc).__name__}: {exc}"
    provider = host.registry.provider(status.kind)
    capture = provider.capture if provider is not None else None
    return {
        "name": status.kind,
        "kind": status.kind,
        "available": status.available,
        "reason": reason,
        "software": status.software,
        "devices": [
            dict(d, capture=capture) if isinstance(d, dict) and status.available else d
            for d in status.devices
        ],
        "capabilities": caps,
    }


def plugins_report(host: Host) -> list[dict[str, Any]]:
    """Every plugin: name, distribution, version, status (loaded|error|disabled), error."""
    return [
        {"name": r.name, "dist": r.dist, "version": r.version, "status": r.status, "error": r.error}
        for r in host.plugins.records
    ]


def ops_report(host: Host, *, kernels: bool = False) -> list[dict[str, Any]]:
    """Every op: name, distribution(s), status (ok|conflict), the variant kind per backend,
    and ``unavailable``: variant kind -> why it cannot run (its unmet requirement).

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
            "unavailable": rec.spec.unavailable() if rec.spec is not None else {},
        }
        if kernels:
            shipped = rec.spec.kernels if rec.spec is not None else ()
            entry["kernels"] = [
                {
                    "name": k.name,
                    "language": k.language,
                    "archs": list(k.archs),
                    "build_info": dict(k.build_info),
                    "summary": k.describe(),
                }
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
    "reason": 3,
    "error": 3,
    "devices": 2,
    "capabilities": 2,
    "variants": 2,
    "kernels": 3,
    "message": 4,
}


def _table(title: str, columns: Sequence[str], rows: list[list[Any]]) -> Table:
    table = Table(title=title, title_justify="left", expand=True)
    for column in columns:
        table.add_column(column, overflow="fold", ratio=_RATIOS.get(column))
    for row in rows:
        table.add_row(*(Text("" if v is None else str(v)) for v in row))
    return table


def _device_summary(devices: list[Any]) -> str:
    """Device names with their counts, e.g. ``2 x llvmpipe``; ``-`` for none; a device the
    probe cache described says so."""
    counts: dict[str, int] = {}
    for d in devices:
        name = str(d.get("name", d)) if isinstance(d, dict) else str(d)
        if isinstance(d, dict) and d.get("probe") == "cache":
            name += " (from the probe cache)"
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} x {name}" if n > 1 else name for name, n in counts.items()) or "-"


def _backends_table(backends: list[dict[str, Any]]) -> Table:
    rows = []
    for b in backends:
        devices = _device_summary(b["devices"])
        on = ", ".join(name for name, v in b["capabilities"].items() if v) or "-"
        forms = {str(d["capture"]) for d in b["devices"] if isinstance(d, dict) and "capture" in d}
        if forms:
            on += f"; capture: {', '.join(sorted(forms))}"
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
        unavailable = "\n".join(f"{k} unavailable: {r}" for k, r in o["unavailable"].items())
        variants = "\n".join(part for part in (variants, unavailable) if part)
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
    tables = [
        _backends_table(report["backends"]),
        _plugins_table(report["plugins"]),
        _ops_table(ops_report(host, kernels=True)),
    ]
    if args.probe_p2p:
        report["p2p"], summary = p2p_report(host)
        tables.append(_p2p_table(report["p2p"], summary))
    _emit(args, report, *tables)
    return 0


def p2p_report(host: Host) -> tuple[list[dict[str, Any]], str]:
    """``caps --probe-p2p``: every ordered CUDA device pair probed with a checksummed copy and
    a bandwidth sample (``verified | unsupported | failed``), and a one-line summary."""
    status = host.backend_status("cuda")
    if not status.available:
        return [], f"no device pairs to probe: CUDA is unavailable ({status.reason})"
    from . import cuda

    probes, summary = cuda.probe_p2p(host)
    return [p.as_dict() for p in probes], summary


def _p2p_table(pairs: list[dict[str, Any]], summary: str) -> Table:
    rows = [
        [
            f"cuda:{p['dst']}",
            f"cuda:{p['src']}",
            p["status"],
            "" if p["gbps"] is None else f"{p['gbps']:.1f}",
            p["link"].get("performance_rank"),
            p["detail"],
        ]
        for p in pairs
    ]
    table = _table(
        "Peer copies (dst reads src)", ["dst", "src", "status", "GB/s", "link rank", "reason"], rows
    )
    table.caption, table.caption_justify = summary, "left"
    return table


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


def _inputs(sig: Any, shape: tuple[int, ...], dt: Any, seed: int) -> list[Any]:
    try:
        return random_inputs(sig, shape, dt, seed)
    except (MemoryError, ValueError) as exc:
        raise ValidationError(
            f"--shape {'x'.join(map(str, shape))}: cannot make {len(sig.inputs)} input(s) of "
            f"{dt.name} that large ({type(exc).__name__}); use a smaller shape",
            argument="shape",
        ) from exc


def _variant_runner(
    host: Host, spec: Any, runtime: Any, forced: str | None, check: bool
) -> tuple[str, Any]:
    """(variant kind, a function running it on tensors): the host's choice or ``--variant``.

    Under ``--check`` the variant is called directly, so an output that breaks the op's
    declared rules is reported as a failed check (exit 1) rather than raised by ``host.run``.
    """
    chosen = host.variants_by_backend(spec.name).get(runtime.kind)
    if forced is None:
        if chosen is None:
            raise UnsupportedError(
                f"op {spec.name!r} has no variant for backend {runtime.name!r} (it has "
                f"{', '.join(spec.variants)}); pick another --backend",
                backend=runtime.name,
                feature="variant",
                op=spec.name,
            )
        if not check:
            return chosen, lambda *t, **a: host.run(spec.name, *t, backend=runtime.name, **a)
        forced = chosen
    if forced not in spec.variants:
        raise ValidationError(
            f"--variant {forced!r}: op {spec.name!r} has {', '.join(spec.variants)}",
            argument="variant",
            op=spec.name,
        )
    from .testing.conformance import claimed_backends, run_variant

    if runtime.kind not in claimed_backends(host, spec, forced):
        raise ValidationError(
            f"--variant {forced!r} does not run on {runtime.name}; pick a backend it claims "
            f"({', '.join(claimed_backends(host, spec, forced)) or 'none installed'})",
            argument="variant",
            op=spec.name,
        )
    return forced, lambda *t, **a: run_variant(spec, forced, runtime, t, a).result


def cmd_run(host: Host, args: argparse.Namespace) -> int:
    spec = host.registry.op(args.op).spec
    assert spec is not None
    sig = spec.signature
    runtime = host.backend(args.backend or host.default_backend())
    dt = default_dtype(sig) if args.dtype is None else accepted_dtype(sig, args.dtype, spec.name)
    attrs = dict(parse_attr(a, dict(sig.attributes), spec.name) for a in args.attr)
    arrays = _inputs(sig, args.shape, dt, args.seed)
    tensors = [runtime.upload(a) for a in arrays]
    kind, run = _variant_runner(host, spec, runtime, args.variant, args.check)
    what = f"op {spec.name!r} (variant {kind!r} on {runtime.name})"

    result = call_op_code(what, run, *tensors, **attrs)  # warm-up, and the checked result
    problem = None
    if args.check:
        problem = output_problem(spec, kind, runtime, tensors, result, attrs)
        if problem is None:
            expected = as_outputs(
                call_op_code(f"the reference of {spec.name!r}", spec.reference, *arrays, **attrs)
            )
            got = download_all(result)
            problem = compare_outputs(got, expected, sig.outputs, args.rtol, args.atol, spec)

    seconds: float | None = None
    if problem is None:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            download_all(call_op_code(what, run, *tensors, **attrs))
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)

    check = "skipped" if not args.check else ("failed" if problem else "passed")
    result = {
        "op": spec.name,
        "backend": runtime.name,
        "variant": kind,
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
        what = f"{spec.name} on {runtime.name} ({kind}, {dt.name}, shape {args.shape})"
        if seconds is not None:
            console.print(
                Text(
                    f"{what}: {seconds * 1e3:.3f} ms per run "
                    f"(median of {args.repeat}, output downloaded)"
                )
            )
        if args.check and problem is None:
            console.print(Text("check: passed (matches the numpy reference)"))
    if problem is not None:
        print(
            f"tenferro-host: check failed: {spec.name} on {runtime.name}: {problem}",
            file=sys.stderr,
        )
        return EXIT_CHECK_FAILED
    return EXIT_OK


def check_targets(host: Host, targets: Sequence[str]) -> list[str]:
    """The op names that ``check`` targets: ops by name, then every op of a distribution
    (``ext-add-kernel``) or of an op package (``ext_add_kernel``)."""

    def norm(name: str) -> str:
        return name.lower().replace("-", "_")

    names: list[str] = []
    for target in targets:
        if target in host.registry.ops:
            found = [target]
        else:
            found = sorted(
                rec.name
                for rec in host.registry.ops.values()
                if norm(rec.dist) == norm(target) or rec.name.split(".", 1)[0] == target
            )
        if not found:
            host.registry.op(target)  # the missing-op error, naming plugins that failed
        names += [n for n in found if n not in names]
    return names


def check_report(outcomes: Sequence[Any], ops: Sequence[str], code: int) -> dict[str, Any]:
    """The ``check --json`` document."""
    from .testing.conformance import STATUSES

    return {
        "schema_version": SCHEMA_VERSION,
        "ops": list(ops),
        "exit_code": code,
        "summary": {s: sum(o.status == s for o in outcomes) for s in STATUSES},
        "cases": [
            {
                "id": o.case.id,
                "op": o.case.op,
                "variant": o.case.variant,
                "backend": o.case.backend,
                "check": o.case.check,
                "status": o.status,
                "message": o.message,
                "seconds": round(o.seconds, 4),
            }
            for o in outcomes
        ],
    }


def check_exit_code(outcomes: Sequence[Any]) -> int:
    """3 when an op raised, else 1 when a check failed, else 0."""
    statuses = {o.status for o in outcomes}
    if "error" in statuses:
        return EXIT_OP_RAISED
    return EXIT_CHECK_FAILED if "failed" in statuses else EXIT_OK


def cmd_check(host: Host, args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from .testing.conformance import cases, run_cases

    ops = check_targets(host, args.targets)

    def attrs_of(name: str) -> dict[str, Any]:
        spec = host.registry.op(name).spec
        assert spec is not None
        return dict(parse_attr(a, dict(spec.signature.attributes), name) for a in args.attr)

    selected = [
        case
        for name in ops
        for case in cases(
            host,
            name,
            backends=args.backends,
            variants=args.variants,
            compile_only=args.compile_only,
            rtol=args.rtol,
            atol=args.atol,
            attrs=attrs_of(name),
        )
    ]
    if args.json:
        outcomes = run_cases(selected)
    else:
        with Progress(console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("conformance", total=len(selected))
            outcomes = run_cases(
                selected, lambda o: bar.update(task, advance=1, description=o.case.id)
            )
    code = check_exit_code(outcomes)
    report = check_report(outcomes, ops, code)
    rows = [
        [
            o.case.op,
            o.case.variant,
            o.case.backend,
            o.case.check,
            o.status,
            "" if o.status == "skipped" else o.message,
        ]
        for o in outcomes
    ]
    reasons: dict[str, int] = {}
    for o in outcomes:
        if o.status == "skipped":
            reasons[o.message] = reasons.get(o.message, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in report["summary"].items())
    tables = [
        _table(
            f"Conformance: {summary}",
            ["op", "variant", "backend", "check", "status", "message"],
            rows,
        )
    ]
    if reasons:
        tables.append(
            _table("Skipped", ["cases", "reason"], [[n, reason] for reason, n in reasons.items()])
        )
    _emit(args, report, *tables)
    return code


def cmd_new_op(host: Host | None, args: argparse.Namespace) -> int:
    from pathlib import Path

    from .scaffold import scaffold

    root = scaffold(args.name, Path(args.dir))
    print(
        f"created {root}: edit {args.name}/plugin.py, then `pip install -e {root}` and "
        f"`pytest {root / 'tests'}` (or `sh {root / 'ci.sh'}`)"
    )
    return EXIT_OK


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


def cmd_cache(host: Host, args: argparse.Namespace) -> int:
    """``cache stats|prune|clear|path``: the persistent kernel cache of this user."""
    from .provider import kernel_cache as kc

    switch = os.environ.get(kc.ENV_SWITCH, "").strip().lower()
    text = os.environ.get(kc.ENV_MAX_BYTES, "").strip()
    cache = kc.KernelCache(kc.default_dir(), kc.parse_size(text) if text else kc.DEFAULT_MAX_BYTES)
    report: dict[str, Any] = {"path": str(cache.root), "enabled": switch not in kc.OFF}
    try:
        if args.action == "stats":
            report.update(cache.stats())
        elif args.action == "prune":
            report.update(cache.prune())
        elif args.action == "clear":
            report["removed"] = cache.clear()
    except OSError as exc:
        raise ValidationError(
            f"`cache {args.action}` cannot use the kernel cache at {cache.root}: "
            f"{exc.strerror or exc}; "
            f"check its permissions or point {kc.ENV_DIR} elsewhere",
            argument=kc.ENV_DIR,
        ) from exc
    if not args.json:
        print(cache.root)  # first, whole: a table would fold a long path
        if args.action == "path":
            return 0
    rows = [[k, "-" if v is None else str(v)] for k, v in report.items() if k != "path"]
    _emit(args, report, _table(f"Kernel cache: {args.action}", ["", "value"], rows))
    return 0


def _add_cache_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    cache = sub.add_parser(
        "cache", parents=[common], help="the persistent kernel cache: stats, prune, clear, path"
    )
    cache.add_argument(
        "action",
        choices=["stats", "prune", "clear", "path"],
        help="stats: entries, bytes, hits, misses, evictions, oldest; prune: drop corrupt "
        "entries, dead temp files and what exceeds the bound; clear: remove every entry; "
        "path: the cache directory",
    )
    cache.set_defaults(func=cmd_cache)


def seed_arg(text: str) -> int:
    """A random seed: an integer >= 0 (what numpy's generator takes)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a seed; use an integer >= 0")
    return value


def tolerance_arg(text: str) -> float:
    """A tolerance: a finite number >= 0, e.g. 1e-4."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a tolerance; use a number >= 0")
    return value


def list_arg(text: str) -> list[str]:
    """``cpu,webgpu`` as ``["cpu", "webgpu"]``."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} is empty; give names separated by commas")
    return items


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
    caps = sub.add_parser(
        "caps", parents=[common], help="backends, devices, capabilities, plugins and ops"
    )
    caps.add_argument(
        "--probe-p2p",
        action="store_true",
        help="also copy between every ordered pair of CUDA devices: checksum and bandwidth "
        "(JSON: a 'p2p' list)",
    )
    caps.set_defaults(func=cmd_caps)
    sub.add_parser("plugins", parents=[common], help="installed plugins").set_defaults(
        func=cmd_plugins
    )
    sub.add_parser("ops", parents=[common], help="registered operations").set_defaults(func=cmd_ops)
    tolerances = argparse.ArgumentParser(add_help=False)
    tolerances.add_argument(
        "--rtol", type=tolerance_arg, help="relative tolerance (default: the op's declared one)"
    )
    tolerances.add_argument(
        "--atol", type=tolerance_arg, help="absolute tolerance (default: the op's declared one)"
    )
    run = sub.add_parser(
        "run", parents=[common, tolerances], help="run an op on random inputs, time it, check it"
    )
    run.add_argument("op", metavar="OP", help="operation name, e.g. ext_add_kernel.add")
    run.add_argument("--backend", help="backend name (kind[:index]); default: the best available")
    run.add_argument(
        "--shape", type=shape_arg, default=(1_000_000,), help="input shape (default 1000000)"
    )
    run.add_argument("--dtype", help="input dtype (default float32, if the op accepts it)")
    run.add_argument("--repeat", type=positive_int, default=10, help="timed runs (default 10)")
    run.add_argument("--check", action="store_true", help="compare with the numpy reference")
    run.add_argument("--seed", type=seed_arg, default=0, help="random seed of the inputs (>= 0)")
    run.add_argument(
        "--attr", action="append", default=[], metavar="NAME=VALUE", help="an op attribute"
    )
    run.add_argument(
        "--variant", help="force a variant kind (cpu, cuda-raw, dsl) instead of the host's choice"
    )
    run.set_defaults(func=cmd_run)

    check = sub.add_parser(
        "check",
        parents=[common, tolerances],
        help="run the conformance suite of an op, or of every op of a distribution",
    )
    check.add_argument(
        "targets",
        nargs="+",
        metavar="DIST|OP",
        help="an op name, a distribution name or an op package name",
    )
    check.add_argument(
        "--backends", type=list_arg, help="only these backend kinds, e.g. cpu,webgpu"
    )
    check.add_argument("--variants", type=list_arg, help="only these variant kinds, e.g. dsl")
    check.add_argument(
        "--attr",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an attribute passed to every call of the op (repeatable)",
    )
    check.add_argument(
        "--compile-only",
        action="store_true",
        help="only the GPU-less checks (NVRTC, DSL compile, raw launch arguments)",
    )
    check.set_defaults(func=cmd_check)

    new_op = sub.add_parser("new-op", help="scaffold an operation package")
    new_op.add_argument("name", metavar="NAME", help="package name, e.g. my_ops")
    new_op.add_argument("--dir", default=".", help="parent directory (default: here)")
    new_op.set_defaults(func=cmd_new_op, json=False, strict=False)
    _add_cache_parser(sub, common)
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tenferro-host`` and ``python -m tenferro_host``; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.func is cmd_new_op:
            return cmd_new_op(None, args)
        host = Host(strict=True if args.strict else None)
        host.plugins  # noqa: B018 - load now, so strict mode fails before any output
        return int(args.func(host, args))
    except OpRaised as exc:
        print(f"tenferro-host: op error: {exc}", file=sys.stderr)
        return EXIT_OP_RAISED
    except PluginError as exc:  # strict mode: a plugin failed to load (usage, like --strict)
        print(f"tenferro-host: plugin error: {exc}", file=sys.stderr)
    except TenferroError as exc:
        print(f"tenferro-host: error: {exc}", file=sys.stderr)
    return EXIT_ERROR


__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_OP_RAISED",
    "backend_report",
    "build_parser",
    "caps_report",
    "main",
    "ops_report",
    "p2p_report",
    "parse_attr",
    "plugins_report",
    "shape_arg",
]
