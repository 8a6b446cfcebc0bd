"""``run OP``: an op on random inputs, timed, and checked against its reference."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from .._host import Host
from ..errors import ValidationError
from ._args import (
    common_options,
    parse_attr,
    positive_int,
    seed_arg,
    shape_arg,
    tolerance_options,
)
from ._exit import EXIT_CHECK_FAILED, EXIT_OK, call_op_code, find_op


def _inputs(
    sig: Any, shape: tuple[int, ...] | None, dt: Any, seed: int, attrs: dict[str, Any]
) -> list[Any]:
    """Random inputs of the op's declared shapes (``--shape`` is the first input's)."""
    from ..testing.checks import sample_inputs

    try:
        return sample_inputs(sig, dt, shape, seed, attrs)
    except ValidationError:
        raise  # the shape does not fit the op's declared dimensions: the message says how
    except (MemoryError, ValueError) as exc:
        raise ValidationError(
            f"--shape {'x'.join(map(str, shape or ()))}: cannot make {len(sig.inputs)} input(s) of "
            f"{dt.name} that large ({type(exc).__name__}); use a smaller shape",
            argument="shape",
        ) from exc


def _variant_runner(
    host: Host, spec: Any, runtime: Any, forced: str | None
) -> tuple[str, Any, Any]:
    """(variant kind, a direct call of it, the call to time): the host's choice or
    ``--variant``.

    The first call is always direct, so an output that breaks the op's declared rules is
    reported as a failed check (exit 1), with or without ``--check``, rather than raised by
    ``host.run`` as a usage error. The host's choice is then timed through ``host.run``.
    """
    from ..testing.conformance import claimed_backends, run_variant

    chosen = host.variants_by_backend(spec.name).get(runtime.kind)
    kind = forced or chosen
    if kind is None:
        raise spec.no_variant_error(runtime.name, "; pick another --backend")
    if kind not in spec.variants:
        raise ValidationError(
            f"--variant {kind!r}: op {spec.name!r} has {', '.join(spec.variants)}",
            argument="variant",
            op=spec.name,
        )
    if forced is not None and runtime.kind not in claimed_backends(host, spec, forced):
        raise ValidationError(
            f"--variant {forced!r} does not run on {runtime.name}; pick a backend it claims "
            f"({', '.join(claimed_backends(host, spec, forced)) or 'none installed'})",
            argument="variant",
            op=spec.name,
        )

    def direct(*tensors: Any, **attrs: Any) -> Any:
        return run_variant(spec, kind, runtime, tensors, attrs).result

    if forced is not None:
        return kind, direct, direct
    return kind, direct, lambda *t, **a: host.run(spec.name, *t, backend=runtime.name, **a)


def cmd_run(host: Host, args: argparse.Namespace) -> int:
    import statistics

    from ..testing.checks import (
        accepted_dtype,
        as_outputs,
        compare_outputs,
        default_dtype,
        download_all,
        output_problem,
    )

    spec = find_op(host, args.op).spec
    assert spec is not None
    sig = spec.signature
    runtime = host.backend(args.backend or host.default_backend())
    dt = default_dtype(sig) if args.dtype is None else accepted_dtype(sig, args.dtype, spec.name)
    given = dict(parse_attr(a, dict(sig.attributes), spec.name) for a in args.attr)
    attrs = sig.attributes_or_samples(given)
    arrays = _inputs(sig, args.shape, dt, args.seed, attrs)
    shapes = [a.shape for a in arrays]
    tensors = [runtime.upload(a) for a in arrays]
    kind, direct, timed = _variant_runner(host, spec, runtime, args.variant)
    what = f"op {spec.name!r} (variant {kind!r} on {runtime.name})"

    result = call_op_code(what, direct, *tensors, **attrs)  # warm-up, and the checked result
    problem = output_problem(spec, kind, runtime, tensors, result, attrs)
    if args.check and problem is None:
        expected = as_outputs(
            call_op_code(f"the reference of {spec.name!r}", spec.reference, *arrays, **attrs)
        )
        got = download_all(result)
        problem = compare_outputs(
            got, expected, sig.outputs, args.rtol, args.atol, spec, shapes, attrs
        )

    seconds: float | None = None
    if problem is None:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            download_all(call_op_code(what, timed, *tensors, **attrs))
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)

    check = ("failed" if problem else "passed") if args.check else "skipped"
    result = {
        "op": spec.name,
        "backend": runtime.name,
        "variant": kind,
        "dtype": dt.name,
        "shape": list(shapes[0]) if shapes else [],
        "shapes": [list(s) for s in shapes],
        "repeat": args.repeat,
        "seconds_per_run": seconds,
        "check": check,
        "mismatch": problem,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        from rich.console import Console
        from rich.text import Text

        console = Console()
        shown = shapes[0] if len(set(shapes)) == 1 else ", ".join(map(str, shapes))
        what = f"{spec.name} on {runtime.name} ({kind}, {dt.name}, shape {shown})"
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
        "--shape",
        type=shape_arg,
        help="the first input's shape (default: the op's sample shape, else 1000000); the "
        "other inputs follow the op's declared dimensions",
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
    run.add_argument(
        "--traceback",
        action="store_true",
        help="when the op or its reference raises, also print the traceback (a package bug)",
    )
    run.set_defaults(func=cmd_run)
