"""Choosing an autotuned kernel's config at launch (``@K.autotune``, declared in
:mod:`tenferro_host.kernel._autotune`): the JIT session's part, beside the tables that persist
the winners (:mod:`._tuning_tables`).

On the first launch for a device and key values, the choice comes from, in order: this
process's memo, the winner an earlier process learned on this machine (the persistent kernel
cache; its key holds a digest of the kernel's code, so a winner timed on other code is not
reused), the package's shipped table, and else tuning.

Tuning compares the configs by the device time of the launch the kernel then runs: every config
first runs ``warmup`` untimed launches (compile, module load), then ``repeats`` rounds time each
config once in turn (the default :func:`wall_clock` reads its clock only with the stream idle),
and the least median wins (the earlier config on a tie). Rounds rather than one config after
another, so a change of the device's speed while tuning (clocks, power, a compile's idle gap)
falls on every config alike. Tuning runs on copies of the array arguments with their layout
(shape, strides, offset; views of one storage share one copy): the timed launches are the
chosen one's specialization, and a kernel that accumulates into its output sees it once.

Frozen (``frozen=True`` or ``TENFERRO_AUTOTUNE=frozen``; within :func:`frozen_launches` too, the
conformance kit's calls): never time, use a table or else the first config. The interpreter
(target ``cpu``) has no meaningful clock, so it never times unless a ``timer`` is given: it uses
a table or the first config. Inside a capture nothing is tuned: a launch with no known choice
is a :class:`CaptureError` naming the warm-up.
"""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from time import perf_counter
from typing import Any

from .._env import env_switch
from ..errors import (
    CompileError,
    DslError,
    InvalidLaunchConfigError,
    LaunchError,
    UnsupportedError,
    ValidationError,
)
from ..kernel._autotune import Autotuned, AutotuneWarning, Choice, Config, Timer, canonical
from ..tensor import Tensor
from ._tuning_tables import TABLES

ENV_FREEZE = "TENFERRO_AUTOTUNE"
_FILL_S = 1e-3  # a timed sample of the default clock lasts at least this long
_MAX_BATCH = 100
_ALIGN_BYTES = 256  # a scratch view starts at the original's address modulo this
_MAX_FAST = 4096  # launch keys remembered (dropped all at once beyond)
_FROZEN = ("frozen", "freeze", "off")
_TUNING = ("", "on", "tune")
#: Set within :func:`frozen_launches`.
_FROZEN_HERE: ContextVar[bool] = ContextVar("tenferro_autotune_frozen_here", default=False)

#: What makes one config unusable on a device (it is skipped and reported); other errors (a
#: wrong argument, a closed session) fail the launch as they would without tuning.
CONFIG_ERRORS = (DslError, CompileError, LaunchError, UnsupportedError, InvalidLaunchConfigError)


@contextmanager
def frozen_launches() -> Iterator[None]:
    """Within it no autotuned launch times its configs (timing waits on the stream): each runs
    the choice already known (this process's, one learned on this machine, a shipped table),
    else its first config, which is not remembered, so later launches tune as they would have.
    The conformance kit calls ops within it: tuning's waits are not the op's."""
    token = _FROZEN_HERE.set(True)
    try:
        yield
    finally:
        _FROZEN_HERE.reset(token)


def env_frozen() -> bool:
    """``TENFERRO_AUTOTUNE``: ``frozen`` freezes every autotuned kernel, unset or ``on`` tunes."""
    return env_switch(
        ENV_FREEZE,
        _FROZEN,
        _TUNING,
        "is neither 'frozen' (no tuning: tables or the first config) nor 'on' (tune on first "
        "use); set one of them or unset it",
    )


def wall_clock(
    js: Any, config: Config, run: Callable[[], None], clock: Callable[[], float] = perf_counter
) -> float:
    """The default timer: device seconds per launch, from launches between two synchronizations
    of the runtime's stream (the clock is read only with the stream idle, so neither earlier
    queued work nor a launch still running is missed or counted): one launch, or as many as
    fill about a millisecond (at most 100) when one takes less, so the synchronization's own
    cost does not decide between fast configs. ``clock``: seconds (tests pass their own)."""
    sync = js.runtime.synchronize
    sync()
    start = clock()
    run()
    sync()
    once = clock() - start
    if once >= _FILL_S:
        return once
    n = min(_MAX_BATCH, max(2, int(_FILL_S / max(once, 1e-7))))
    start = clock()
    for _ in range(n):
        run()
    sync()
    return (clock() - start) / n


def launch_autotuned(
    tuned: Autotuned,
    js: Any,
    count: Any,
    dim: Any,
    args: Sequence[Any],
    constants: dict[str, Any],
) -> None:
    """Launch the chosen config in the JIT session ``js`` (what ``js.launch`` does)."""
    clash = sorted(constants.keys() & tuned.tuned_names) if constants else None
    if clash:
        raise ValidationError(
            f"constant {clash[0]!r} of kernel {tuned.name!r} is chosen by autotuning; do not "
            "pass it at launch",
            argument=clash[0],
        )
    choice = choose(tuned, js, count, dim, args, constants)
    _launch_config(tuned, js, choice.config, count, dim, args, constants)


def _launch_config(
    tuned: Autotuned,
    js: Any,
    config: Config,
    count: Any,
    dim: Any,
    args: Sequence[Any],
    constants: Mapping[str, Any],
) -> None:
    """One launch of ``config``: tuning times this very call (on its copies of ``args``) and
    the choice then runs it, so the two cannot differ in count, dim or constants."""
    js.launch(
        tuned.kernel,
        _count(count, config),
        _dim(dim, config),
        *args,
        **constants,
        **config.constants,
    )


def choose(
    tuned: Autotuned,
    js: Any,
    count: Any,
    dim: Any,
    args: Sequence[Any],
    constants: Mapping[str, Any],
) -> Choice:
    """The config for this launch (see the module docstring for the order)."""
    key = _fast_key(tuned, js, args, constants)
    fast: tuple[Any, ...] | None = key
    try:
        found = tuned.fast_memo.get(key)
    except TypeError:  # an unhashable key value: the JSON memo alone
        fast, found = None, None
    if found is not None:
        return found
    device = TABLES.device(js)
    values = _key_values(tuned, args, constants)
    memo = (canonical(device), canonical(values))
    found = tuned.memo.get(memo)
    if found is not None:
        return found
    choice = _known(tuned, device, values)
    if choice is None:
        if tuned.frozen or env_frozen():
            choice = Choice(0, tuned.configs[0], "frozen")
        elif _FROZEN_HERE.get():
            return Choice(0, tuned.configs[0], "frozen")  # not remembered: see frozen_launches
        elif js.runtime.active_capture is not None:
            raise js.runtime.active_capture.refuse(
                f"kernel {tuned.name!r} has no tuned config for {values} on this device, and "
                "a capture cannot tune: tuning it",
                f"launch it once with the same key values before the capture (a "
                f"warm-up), or freeze it ({ENV_FREEZE}=frozen or frozen=True)",
            )
        else:
            timer = tuned.timer or (None if js.target == "cpu" else wall_clock)
            if timer is None:
                choice = Choice(0, tuned.configs[0], "untimed")
            else:
                choice = _tune(tuned, js, timer, count, dim, args, constants)
                stored = _config_index(
                    tuned,
                    TABLES.keep(tuned, device, values, choice.config.plain(), choice.timings) or {},
                )
                if stored is not None and stored != choice.index:  # another process's
                    choice = Choice(stored, tuned.configs[stored], "learned", choice.timings)
    tuned.memo[memo] = choice
    if fast is not None:
        if len(tuned.fast_memo) >= _MAX_FAST:
            tuned.fast_memo.clear()
        tuned.fast_memo[fast] = choice
    return choice


def _fast_key(
    tuned: Autotuned, js: Any, args: Sequence[Any], constants: Mapping[str, Any]
) -> tuple[Any, ...]:
    """The runtime and the key values as they are (dtype and shape of an array): a repeated
    launch finds its choice without building the device key and JSON."""
    parts: list[Any] = [js.runtime]
    for pos, name in tuned.key_slots:
        value: Any = args[pos] if pos is not None and pos < len(args) else constants.get(name)
        shape = getattr(value, "shape", None)
        if shape is None or shape == ():  # a number, a numpy scalar, a constant
            parts.append((type(value), value))
        else:
            parts.append((value.dtype, shape))
    return tuple(parts)


def _key_values(
    tuned: Autotuned, args: Sequence[Any], constants: Mapping[str, Any]
) -> dict[str, str]:
    runtime = {d.name: i for i, d in enumerate(tuned.runtime_params)}
    defaults = {d.name: d.default for d in tuned.kernel.const_params}
    values = {}
    for name in tuned.key:
        value: Any
        if name in runtime:
            value = args[runtime[name]] if runtime[name] < len(args) else None
        else:
            value = constants.get(name, defaults.get(name))
        dtype = getattr(value, "dtype", None)
        shape = getattr(value, "shape", None)
        if hasattr(value, "item") and shape == ():
            value = value.item()  # a numpy scalar: its number
        elif dtype is not None and shape is not None:
            values[name] = f"{getattr(dtype, 'name', dtype)}{list(shape)}"
            continue
        values[name] = repr(value)
    return values


def _config_index(tuned: Autotuned, plain: Mapping[str, Any]) -> int | None:
    for i, config in enumerate(tuned.configs):
        if config.plain() == plain:
            return i
    return None


def _known(tuned: Autotuned, device: dict[str, str], values: dict[str, str]) -> Choice | None:
    """The choice learned on this machine, else the shipped table's, else None."""
    index = _config_index(tuned, TABLES.learned(tuned, device, values) or {})
    if index is not None:  # (a learned config that is not one of ours: tuned again)
        return Choice(index, tuned.configs[index], "learned")
    plain = TABLES.shipped(tuned, device, values)
    if plain is None:
        return None
    index = _config_index(tuned, plain)
    if index is None:
        raise ValidationError(
            f"the autotuning table {tuned.table} names {plain} for kernel {tuned.name!r}, "
            "which is none of its configs; fix the table",
            argument="table",
        )
    return Choice(index, tuned.configs[index], "shipped")


def _tune(
    tuned: Autotuned,
    js: Any,
    timer: Timer,
    count: Any,
    dim: Any,
    args: Sequence[Any],
    constants: Mapping[str, Any],
) -> Choice:
    """Time every config on copies of the arguments: all warm-ups first, then ``repeats``
    rounds of one sample per config (see the module docstring); the least median wins."""
    scratch = _scratch(js, args)
    configs = tuned.configs
    runs = [partial(_launch_config, tuned, js, c, count, dim, scratch, constants) for c in configs]
    samples: list[list[float]] = [[] for _ in configs]
    failed: dict[int, str] = {}  # config index -> why it cannot run here
    for i, run in enumerate(runs):
        try:
            for _ in range(tuned.warmup):
                run()
        except CONFIG_ERRORS as exc:
            failed[i] = f"{type(exc).__name__}: {exc}"
    for _ in range(tuned.repeats):
        for i, config in enumerate(configs):
            if i in failed:
                continue
            try:
                samples[i].append(timer(js, config, runs[i]))
            except CONFIG_ERRORS as exc:
                failed[i] = f"{type(exc).__name__}: {exc}"
    medians = tuple(None if i in failed else statistics.median(s) for i, s in enumerate(samples))
    skipped = sorted(failed.items())
    if skipped:
        why = "; ".join(f"config {i} {configs[i]!r}: {msg}" for i, msg in skipped)
        if len(skipped) == len(configs):
            raise UnsupportedError(
                f"no config of kernel {tuned.name!r} runs on this device: {why}",
                feature="autotune configs",
                backend=js.runtime.name,
            )
        warnings.warn(
            f"autotuning kernel {tuned.name!r} skipped {why}", AutotuneWarning, stacklevel=4
        )
    best = min((m, i) for i, m in enumerate(medians) if m is not None)[1]
    return Choice(best, configs[best], "tuned", medians, tuple(skipped))


def _count(count: Any, config: Config) -> Any:
    return count(config) if callable(count) else count


def _dim(dim: Any, config: Config) -> Any:
    if config.dim is not None:
        return config.dim
    if dim is None:
        raise InvalidLaunchConfigError(
            f"{config!r} has no dim and the launch passed none; give one of them", argument="dim"
        )
    return dim


def _scratch(js: Any, args: Sequence[Any]) -> list[Any]:
    """``args`` with each array replaced by a view of the same shape, strides and offset (modulo
    :data:`_ALIGN_BYTES`) into a copy of the part of its storage the arrays here touch, one copy
    per storage: the timed launches have the chosen launch's specialization (compact or
    strided), alignment and aliasing, and never write the arguments themselves."""
    tensors = [getattr(value, "tensor", value) for value in args]  # a JitBinding's tensor
    spans: dict[tuple[int, Any], tuple[Tensor, int, int]] = {}
    for t in tensors:
        if isinstance(t, Tensor):
            lo, hi = t.span()
            seen = spans.get((id(t.storage), t.dtype))
            if seen is not None:
                lo, hi = min(lo, seen[1]), max(hi, seen[2])
            spans[(id(t.storage), t.dtype)] = (t, lo, hi)
    copies: dict[tuple[int, Any], tuple[int, Tensor]] = {}
    for where, (t, lo, hi) in spans.items():
        start = lo - lo % max(1, _ALIGN_BYTES // t.dtype.itemsize)
        part = Tensor(t.storage, t.dtype, (hi - start,), (1,), start)
        copies[where] = (start, js.runtime.canonicalize(part))
    out = []
    for value, t in zip(args, tensors, strict=True):
        if isinstance(t, Tensor):
            start, copy = copies[(id(t.storage), t.dtype)]
            out.append(Tensor(copy.storage, t.dtype, t.shape, t.strides, t.offset - start))
        else:
            out.append(value)
    return out


__all__ = ["ENV_FREEZE", "choose", "frozen_launches", "launch_autotuned", "wall_clock"]
