"""``check DIST|OP``: the conformance suite over ops, with a table or a JSON report."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._host import Host
from ..errors import ValidationError
from ._args import common_options, list_arg, parse_attr, table_options, tolerance_options
from ._exit import EXIT_CHECK_FAILED, EXIT_OK, EXIT_OP_RAISED, SCHEMA_VERSION, find_op
from ._tables import Notes, emit, make_table

if TYPE_CHECKING:
    from rich.console import RenderableType


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
            find_op(host, target)  # the missing-op error, naming plugins that failed
        names += [n for n in found if n not in names]
    return names


def check_report(outcomes: Sequence[Any], ops: Sequence[str], code: int) -> dict[str, Any]:
    """The ``check --json`` document."""
    from ..testing.conformance import STATUSES

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


def check_selection(host: Host, args: argparse.Namespace) -> None:
    """Refuse a ``--backends``, ``--variants`` or ``--skip`` name that matches nothing: a typo
    must not drop every runtime check and pass."""
    from ..ops import VARIANT_KINDS
    from ..testing.conformance import CHECKS

    for option, given, known in (
        ("--backends", args.backends, sorted(host.registry.providers)),
        ("--variants", args.variants, VARIANT_KINDS),
        ("--skip", args.skip, CHECKS),
    ):
        unknown = [name for name in given or () if name not in known]
        if unknown:
            raise ValidationError(
                f"{option} {','.join(unknown)}: no such name; the known ones are "
                f"{', '.join(known)}",
                argument=option,
            )


def cmd_check(host: Host, args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from ..testing.conformance import cases, run_cases

    check_selection(host, args)
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
            skip=args.skip or (),
        )
    ]
    if args.frameworks:
        from ..testing.frameworks import framework_cases

        selected += [
            case
            for name in ops
            for case in framework_cases(host, name, attrs_of(name))
            if args.backends is None or case.backend in args.backends
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
    shown = [o for o in outcomes if not args.failures_only or o.status in ("failed", "error")]
    if args.failures_only:
        report["cases"] = [c for c in report["cases"] if c["status"] in ("failed", "error")]
    summary = ", ".join(f"{n} {s}" for s, n in report["summary"].items())
    emit(args, report, _outcomes_table(f"Conformance: {summary}", shown, args.wide))
    return code


def _outcomes_table(title: str, outcomes: Sequence[Any], wide: bool) -> RenderableType:
    """One line per case; a failure's message or a skip's reason is a note, said once."""
    notes = Notes()
    rows = [
        [
            o.case.op,
            o.case.variant,
            o.case.backend,
            o.case.check,
            o.status + (" " + notes.mark(o.message) if o.message else ""),
        ]
        for o in outcomes
    ]
    columns = ["op", "variant", "backend", "check", "status"]
    return make_table(title, columns, rows, notes=notes, wide=wide)


def add_parser(sub: Any) -> None:
    """The ``check`` command."""
    check = sub.add_parser(
        "check",
        parents=[common_options(), table_options(), tolerance_options()],
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
    check.add_argument(
        "--skip",
        type=list_arg,
        metavar="CHECK[,CHECK]",
        help="leave out these checks, named as the table's check column names them, "
        "e.g. views,sessions",
    )
    check.add_argument(
        "--failures-only",
        action="store_true",
        help="list only the failed and raised cases (the summary still counts every case)",
    )
    check.add_argument(
        "--frameworks",
        action="store_true",
        help="also export each op to torch and JAX (where installed): opcheck, jit, vmap",
    )
    check.set_defaults(func=cmd_check)
