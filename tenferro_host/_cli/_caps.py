"""``caps``, ``plugins`` and ``ops``: what this machine offers, as reports and tables."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from .._host import Host
from .._loader import OWN_DIST, plugin_source
from ..capability import ExtensionCapability
from ..provider._compiled import STATE as COMPILED_STATE
from ..provider._registry import BackendStatus
from ._args import common_options, table_options
from ._exit import SCHEMA_VERSION
from ._tables import Notes, emit, make_table

if TYPE_CHECKING:
    from rich.console import RenderableType


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


def plugins_report(host: Host, *, sources: bool = False) -> list[dict[str, Any]]:
    """Every plugin: name, distribution, version, status (loaded|error|disabled), error.

    With ``sources`` (``plugins``; ``caps --json`` keeps exactly the schema-1 keys), also where
    its code comes from — ``module``, ``file``, ``install`` (editable|installed), ``url`` — and
    why a disabled one was not loaded (``reason``), found without importing it.
    """
    report = []
    for r in host.plugins.records:
        entry: dict[str, Any] = {
            "name": r.name,
            "dist": r.dist,
            "version": r.version,
            "status": r.status,
            "error": r.error,
        }
        if sources:
            entry.update(module=r.module, **plugin_source(r), reason=r.reason)
        report.append(entry)
    return report


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
        "op_call": COMPILED_STATE,
    }


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


def _backends_table(backends: list[dict[str, Any]], wide: bool) -> RenderableType:
    notes = Notes()
    rows = []
    for b in backends:
        devices = _device_summary(b["devices"])
        on = ", ".join(name for name, v in b["capabilities"].items() if v) or "-"
        forms = {str(d["capture"]) for d in b["devices"] if isinstance(d, dict) and "capture" in d}
        if forms:
            on += f"; capture: {', '.join(sorted(forms))}"
        available = "yes" + (" (software)" if b["software"] else "") if b["available"] else "no"
        if b["reason"]:
            available += " " + notes.mark(f"{b['name']}: {b['reason']}")
        rows.append([b["name"], available, devices, on])
    columns = ["name", "available", "devices", "capabilities"]
    notes.mark(f"planned op calls: {COMPILED_STATE}")
    return make_table("Backends", columns, rows, notes=notes, wide=wide)


def _plugins_table(plugins: list[dict[str, Any]], wide: bool) -> RenderableType:
    notes = Notes()
    rows = []
    for p in plugins:
        note = p["error"] or p.get("reason")
        rows.append(
            [
                p["name"],
                p["dist"],
                p["version"],
                p["status"] + (" " + notes.mark(f"{p['name']}: {note}") if note else ""),
            ]
        )
    columns = ["name", "distribution", "version", "status"]
    if plugins and "install" in plugins[0]:  # `plugins`: how each is installed
        columns.append("install")
        for row, p in zip(rows, plugins, strict=True):
            row.append(p["install"])
    return make_table("Plugins", columns, rows, notes=notes, wide=wide)


def _ops_table(ops: list[dict[str, Any]], wide: bool) -> RenderableType:
    """One line per op, a column per backend naming the variant that runs there; why a
    variant cannot run is a note. ``wide`` adds the distribution and the shipped kernels."""
    notes = Notes()
    backends = sorted({b for o in ops for b in o["variants"]}, key=_backend_order)
    rows = []
    for o in ops:
        cells = []
        for backend in backends:
            kind = o["variants"].get(backend, "-")
            reason = o["unavailable"].get(kind)
            cells.append(kind + (" " + notes.mark(f"{kind}: {reason}") if reason else ""))
        status = o["status"]
        if status == "conflict":
            status += " " + notes.mark(
                f"{o['name']}: registered by {o['dist']}; both registrations are dropped"
            )
        row = [o["name"], *cells, status]
        if wide:
            row += [o["dist"], "; ".join(k["summary"] for k in o.get("kernels", ())) or "-"]
        rows.append(row)
    columns = ["name", *backends, "status"] + (["distribution", "kernels"] if wide else [])
    return make_table("Operations", columns, rows, notes=notes, wide=wide)


def _backend_order(kind: str) -> tuple[int, str]:
    """The CPU first, then the GPU backends by name."""
    return (kind != "cpu", kind)


def cmd_caps(host: Host, args: argparse.Namespace) -> int:
    report = caps_report(host)
    if args.json and not args.probe_p2p:  # no tables to build (nor rich to load)
        emit(args, report)
        return 0
    tables = [
        _backends_table(report["backends"], args.wide),
        _plugins_table(report["plugins"], args.wide),
        _ops_table(ops_report(host, kernels=True), args.wide),
    ]
    if args.probe_p2p:
        report["p2p"], summary = p2p_report(host)
        tables.append(_p2p_table(report["p2p"], summary, args.wide))
    emit(args, report, *tables)
    return 0


def p2p_report(host: Host) -> tuple[list[dict[str, Any]], str]:
    """``caps --probe-p2p``: every ordered CUDA device pair probed with a checksummed copy and
    a bandwidth sample (``verified | unsupported | failed``), and a one-line summary."""
    status = host.backend_status("cuda")
    if not status.available:
        return [], f"no device pairs to probe: CUDA is unavailable ({status.reason})"
    from .. import cuda

    probes, summary = cuda.probe_p2p(host)
    return [p.as_dict() for p in probes], summary


def _p2p_table(pairs: list[dict[str, Any]], summary: str, wide: bool) -> RenderableType:
    notes = Notes()
    rows = [
        [
            f"cuda:{p['dst']}",
            f"cuda:{p['src']}",
            p["status"] + (" " + notes.mark(p["detail"]) if p["detail"] else ""),
            "" if p["gbps"] is None else f"{p['gbps']:.1f}",
            p["link"].get("performance_rank"),
        ]
        for p in pairs
    ]
    columns = ["dst", "src", "status", "GB/s", "link rank"]
    table = make_table("Peer copies (dst reads src)", columns, rows, notes=notes, wide=wide)
    from rich.console import Group
    from rich.text import Text

    return Group(table, Text(summary))


def cmd_plugins(host: Host, args: argparse.Namespace) -> int:
    report = plugins_report(host, sources=True)
    emit(args, report, _plugins_table(report, args.wide))
    if not args.json:  # whole lines under the table: a column would fold a long path
        width = max((len(p["name"]) for p in report), default=0)
        print("Code:")
        for p in report:
            shown = _shown_path(p["file"]) if p["file"] else p["module"] + " (not found)"
            print(f"  {p['name']:<{width}}  {shown}")
    return 0


def _shown_path(path: str) -> str:
    """A module file relative to the working directory when under it, else as it is."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if relative.startswith(os.pardir) else relative


def cmd_ops(host: Host, args: argparse.Namespace) -> int:
    report = ops_report(host, kernels=True)
    emit(args, report, _ops_table(report, args.wide))
    return 0


def _selection() -> argparse.ArgumentParser:
    """``--builtin-only``, for the commands that list what plugins bring."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--builtin-only",
        action="store_true",
        help=f"load no third-party plugin: only {OWN_DIST}'s own (also TENFERRO_PLUGINS=a,b: "
        "only those; TENFERRO_DISABLE_PLUGINS=a,b: not those)",
    )
    return parser


def add_parser(sub: Any) -> None:
    """The ``caps``, ``plugins`` and ``ops`` commands."""
    parents = [common_options(), table_options(), _selection()]
    caps = sub.add_parser(
        "caps", parents=parents, help="backends, devices, capabilities, plugins and ops"
    )
    caps.add_argument(
        "--probe-p2p",
        action="store_true",
        help="also copy between every ordered pair of CUDA devices: checksum and bandwidth "
        "(JSON: a 'p2p' list)",
    )
    caps.set_defaults(func=cmd_caps)
    sub.add_parser(
        "plugins", parents=parents, help="installed plugins and where their code comes from"
    ).set_defaults(func=cmd_plugins)
    sub.add_parser("ops", parents=parents, help="registered operations").set_defaults(func=cmd_ops)
