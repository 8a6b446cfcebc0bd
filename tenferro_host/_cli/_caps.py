"""``caps``, ``plugins`` and ``ops``: what this machine offers, as reports and tables."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from .._host import Host
from ..capability import ExtensionCapability
from ..provider.registry import BackendStatus
from ._args import common_options
from ._exit import SCHEMA_VERSION
from ._tables import emit, make_table


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
    return make_table("Backends", ["name", "available", "devices", "capabilities", "reason"], rows)


def _plugins_table(plugins: list[dict[str, Any]]) -> Table:
    rows = [[p["name"], p["dist"], p["version"], p["status"], p["error"]] for p in plugins]
    return make_table("Plugins", ["name", "distribution", "version", "status", "error"], rows)


def _ops_table(ops: list[dict[str, Any]]) -> Table:
    rows = []
    for o in ops:
        variants = "\n".join(f"{k}: {v}" for k, v in o["variants"].items())
        unavailable = "\n".join(f"{k} unavailable: {r}" for k, r in o["unavailable"].items())
        variants = "\n".join(part for part in (variants, unavailable) if part)
        kernels = "\n".join(k["summary"] for k in o.get("kernels", ()))
        rows.append([o["name"], o["dist"], o["status"], variants, kernels])
    return make_table("Operations", ["name", "distribution", "status", "variants", "kernels"], rows)


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
    table = make_table(
        "Peer copies (dst reads src)", ["dst", "src", "status", "GB/s", "link rank", "reason"], rows
    )
    table.caption, table.caption_justify = summary, "left"
    return table


def cmd_plugins(host: Host, args: argparse.Namespace) -> int:
    report = plugins_report(host)
    emit(args, report, _plugins_table(report))
    return 0


def cmd_ops(host: Host, args: argparse.Namespace) -> int:
    report = ops_report(host, kernels=True)
    emit(args, report, _ops_table(report))
    return 0


def add_parser(sub: Any) -> None:
    """The ``caps``, ``plugins`` and ``ops`` commands."""
    caps = sub.add_parser(
        "caps", parents=[common_options()], help="backends, devices, capabilities, plugins and ops"
    )
    caps.add_argument(
        "--probe-p2p",
        action="store_true",
        help="also copy between every ordered pair of CUDA devices: checksum and bandwidth "
        "(JSON: a 'p2p' list)",
    )
    caps.set_defaults(func=cmd_caps)
    sub.add_parser("plugins", parents=[common_options()], help="installed plugins").set_defaults(
        func=cmd_plugins
    )
    sub.add_parser("ops", parents=[common_options()], help="registered operations").set_defaults(
        func=cmd_ops
    )
