"""``run OP``: an op on random inputs, timed, and checked against its reference."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from rich.console import Console
from rich.text import Text

from .._host import Host
from ..errors import UnsupportedError, ValidationError
from ..testing.checks import (
    accepted_dtype,
    as_outputs,
    compare_outputs,
    default_dtype,
    download_all,
    output_problem,
    random_inputs,
)
from ._args import (
    common_options,
    parse_attr,
    positive_int,
    seed_arg,
    shape_arg,
    tolerance_options,
)
from ._exit import EXIT_CHECK_FAILED, EXIT_OK, call_op_code


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
    from ..testing.conformance import claimed_backends, run_variant

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


def add_parser(sub: Any) -> None:
    """The ``run`` command."""
    run = sub.add_parser(
        "run",
        parents=[common_options(), tolerance_options()],
        help="run an op on random inputs, time it, check it",
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
