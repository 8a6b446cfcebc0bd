"""``@K.autotune``: run the fastest of a kernel's configs, chosen once per chip and key.

A config is a set of compile-time constants and a launch shape. On the first launch for a
device and key values, the choice comes from, in order: this process's memo, the winner an
earlier process learned on this machine (the persistent kernel cache), the package's shipped
table, and else tuning: each config runs ``warmup`` times, then ``repeats`` timed launches on
the runtime's stream, and the config with the least median wins (the earlier one on a tie).
Tuning runs on copies of the array arguments, so a kernel that accumulates into its output
sees it once. Frozen (``frozen=True`` or ``TENFERRO_AUTOTUNE=frozen``; within
:func:`frozen_launches` too, the conformance kit's calls): never time, use a table or else the
first config. The interpreter (target ``cpu``) has no meaningful clock, so it never
times unless a ``timer`` is given: it uses a table or the first config. Inside a capture nothing
is tuned: a launch with no known choice is a :class:`CaptureError` naming the warm-up.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any, Protocol

from .._env import env_switch
from ..errors import (
    CaptureError,
    CompileError,
    DslError,
    InvalidLaunchConfigError,
    LaunchError,
    UnsupportedError,
    ValidationError,
)
from ._kernel import Kernel

ENV_FREEZE = "TENFERRO_AUTOTUNE"
_FILL_S = 1e-3  # a timed sample of the default clock lasts at least this long
_MAX_BATCH = 100
_MAX_FAST = 4096  # launch keys remembered (dropped all at once beyond)
_FROZEN = ("frozen", "freeze", "off")
_TUNING = ("", "on", "tune")
#: Set within :func:`frozen_launches`.
_FROZEN_HERE: ContextVar[bool] = ContextVar("tenferro_autotune_frozen_here", default=False)

#: What makes one config unusable on a device (it is skipped and reported); other errors (a
#: wrong argument, a closed session) fail the launch as they would without tuning.
CONFIG_ERRORS = (DslError, CompileError, LaunchError, UnsupportedError, InvalidLaunchConfigError)

#: ``timer(js, config, run)``: the seconds one ``run()`` (one launch of ``config``) takes.
Timer = Callable[[Any, "Config", Callable[[], None]], float]


class Tables(Protocol):
    """Where choices persist between processes: the JIT base hands in the kernel cache's
    (:mod:`tenferro_host.provider._tuning_tables`). Configs travel in their plain form."""

    def device(self, js: Any) -> dict[str, str]:
        """The device key of the JIT session's runtime."""

    def learned(self, tuned: Autotuned, device: dict[str, str], values: dict[str, str]) -> Any:
        """The plain config learned on this machine, or None."""

    def shipped(self, tuned: Autotuned, device: dict[str, str], values: dict[str, str]) -> Any:
        """The plain config of the matching shipped-table entry, or None."""

    def keep(
        self,
        tuned: Autotuned,
        device: dict[str, str],
        values: dict[str, str],
        config: dict[str, Any],
        timings: tuple[float | None, ...],
    ) -> Any:
        """Store a winner; the plain config stored first (another process's, perhaps)."""


class AutotuneWarning(UserWarning):
    """Configs that could not run on this device were skipped while tuning (named, with why)."""


class Config:
    """One choice for an autotuned kernel: compile-time ``constants`` and the cube ``dim``
    (None: the ``dim`` passed at launch). ``config["BM"]`` reads a constant (grid functions).

    Shipped tables read their configs through it too, so a table takes the forms it takes; a
    wrong field is a ValidationError whose ``argument`` names it."""

    __slots__ = ("constants", "dim")

    def __init__(self, constants: Mapping[str, Any] | None = None, *, dim: Any = None) -> None:
        if constants is not None and not isinstance(constants, Mapping):
            raise ValidationError(
                "a config's constants must map compile-time constant names to values, such as "
                f'{{"BM": 64}}; got {constants!r}',
                argument="constants",
            )
        self.constants = dict(constants or {})
        self.dim: tuple[int, ...] | None = None if dim is None else _cube(dim)

    def __getitem__(self, name: str) -> Any:
        return self.constants[name]

    def plain(self) -> dict[str, Any]:
        """The JSON form tables store and compare."""
        return {"constants": self.constants, "dim": None if self.dim is None else list(self.dim)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self.plain() == other.plain()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"K.Config({self.constants!r}, dim={self.dim!r})"


def _cube(dim: Any) -> tuple[int, ...]:
    """A config's ``dim`` as ints: one positive int or a sequence of 1 to 3 of them."""
    dims = (dim,) if isinstance(dim, Integral) else dim
    if (
        isinstance(dims, Sequence)
        and not isinstance(dims, str)
        and 1 <= len(dims) <= 3
        and all(isinstance(d, Integral) and not isinstance(d, bool) and int(d) > 0 for d in dims)
    ):
        return tuple(int(d) for d in dims)
    raise InvalidLaunchConfigError(
        "a config's dim (its cube shape) must be None, a positive int or 1 to 3 positive ints, "
        f"such as 64 or [16, 16]; got {dim!r}",
        argument="dim",
    )


@dataclass(frozen=True)
class Choice:
    """The config one (device, key) runs and where it came from: ``tuned``, ``learned`` (an
    earlier process on this machine), ``shipped`` (the package's table), ``frozen`` or
    ``untimed`` (the first config). ``timings``: each config's median in seconds (None where
    it was skipped), when this process tuned; ``skipped``: (config index, why)."""

    index: int
    config: Config
    source: str
    timings: tuple[float | None, ...] = ()
    skipped: tuple[tuple[int, str], ...] = ()


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


def wall_clock(js: Any, config: Config, run: Callable[[], None]) -> float:
    """Seconds per launch, from launches between two synchronizations of the runtime's stream:
    one, or as many as fill about a millisecond (at most 100) when one takes less, so the
    synchronization's own cost does not decide between fast configs."""
    sync = js.runtime.synchronize
    sync()
    start = time.perf_counter()
    run()
    sync()
    once = time.perf_counter() - start
    if once >= _FILL_S:
        return once
    n = min(_MAX_BATCH, max(2, int(_FILL_S / max(once, 1e-7))))
    start = time.perf_counter()
    for _ in range(n):
        run()
    sync()
    return (time.perf_counter() - start) / n


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


class Autotuned:
    """A DSL kernel with configs to choose from; launch it like the kernel (``js.launch``)."""

    def __init__(
        self,
        kernel: Kernel,
        configs: Sequence[Config],
        key: Sequence[str] = (),
        *,
        frozen: bool = False,
        table: str | os.PathLike[str] | None = None,
        timer: Timer | None = None,
        warmup: int = 2,
        repeats: int = 5,
    ) -> None:
        if not isinstance(kernel, Kernel):
            kernel = Kernel(kernel)
        self.kernel = kernel
        self.name = kernel.name
        self.runtime_params = kernel.runtime_params
        self.shared_size_args = kernel.shared_size_args
        self.configs = self._checked_configs(configs)
        self.key = self._checked_key(key)
        for what, n in (("warmup", warmup), ("repeats", repeats)):
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValidationError(
                    f"autotune {what} must be an int >= 1, got {n!r}", argument=what
                )
        self.frozen, self.timer, self.warmup, self.repeats = bool(frozen), timer, warmup, repeats
        self.table = self._table_path(table)
        self._choices: dict[tuple[str, str], Choice] = {}
        self._fast: dict[tuple[Any, ...], Choice] = {}
        positions = {d.name: i for i, d in enumerate(self.runtime_params)}
        self._slots = tuple((positions.get(name), name) for name in self.key)
        parsed = kernel.parsed
        self.identity = {
            "kernel": self.name,
            "file": parsed.filename,
            "body": hashlib.sha256(ast.dump(parsed.func).encode()).hexdigest()[:16],
            "configs": hashlib.sha256(
                _canonical([c.plain() for c in self.configs]).encode()
            ).hexdigest()[:16],
        }

    def _checked_configs(self, configs: Sequence[Config]) -> tuple[Config, ...]:
        configs = tuple(configs)
        if not configs:
            raise ValidationError(
                f"@K.autotune of kernel {self.name!r} has no configs; give at least one "
                "K.Config(...)",
                argument="configs",
            )
        known = {d.name for d in self.kernel.const_params}
        for i, config in enumerate(configs):
            if not isinstance(config, Config):
                raise ValidationError(
                    f"config {i} of kernel {self.name!r} is {config!r}, not a K.Config",
                    argument="configs",
                )
            unknown = sorted(set(config.constants) - known)
            if unknown:
                raise ValidationError(
                    f"config {i} of kernel {self.name!r} sets {unknown[0]!r}, which is not one "
                    f"of its compile-time constants ({', '.join(sorted(known)) or 'none'}); "
                    "declare it K.Const[...] in the signature",
                    argument="configs",
                )
            if config in configs[:i]:
                raise ValidationError(
                    f"config {i} of kernel {self.name!r} repeats an earlier one: {config!r}",
                    argument="configs",
                )
        return configs

    def _checked_key(self, key: Sequence[str]) -> tuple[str, ...]:
        if isinstance(key, str):
            key = (key,)
        names = [d.name for d in self.kernel.parsed.params]
        tuned = {name for c in self.configs for name in c.constants}
        for name in key:
            if name not in names:
                raise ValidationError(
                    f"autotune key {name!r} is not a parameter of kernel {self.name!r} "
                    f"({', '.join(names)})",
                    argument="key",
                )
            if name in tuned:
                raise ValidationError(
                    f"autotune key {name!r} of kernel {self.name!r} is set by the configs; a "
                    "key is a launch argument the choice depends on",
                    argument="key",
                )
        return tuple(key)

    def _table_path(self, table: str | os.PathLike[str] | None) -> Path | None:
        here = Path(self.kernel.parsed.filename)
        if table is None:
            default = here.with_name(here.stem + ".autotune.json")
            return default if default.is_file() else None
        path = here.parent / table
        if not path.is_file():
            raise ValidationError(
                f"the autotuning table {path} of kernel {self.name!r} does not exist; ship it "
                "in the package next to the kernel's module (or pass table=None)",
                argument="table",
            )
        return path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.kernel(*args, **kwargs)  # a DslError: kernels launch in a JIT session

    def __repr__(self) -> str:
        return f"<K.autotune {self.name} ({len(self.configs)} configs, key={list(self.key)})>"

    def choices(self) -> dict[tuple[str, str], Choice]:
        """This process's choices by (device, key values), as JSON strings."""
        return dict(self._choices)

    # -------------------------------------------------------- launching

    def launch_in(
        self,
        js: Any,
        count: Any,
        dim: Any,
        args: Sequence[Any],
        constants: dict[str, Any],
        tables: Tables,
    ) -> None:
        """Launch the chosen config in the JIT session ``js`` (what ``js.launch`` does)."""
        clash = sorted(set(constants) & {n for c in self.configs for n in c.constants})
        if clash:
            raise ValidationError(
                f"constant {clash[0]!r} of kernel {self.name!r} is chosen by autotuning; do not "
                "pass it at launch",
                argument=clash[0],
            )
        choice = self.choose(js, count, dim, args, constants, tables)
        config = choice.config
        js.launch(
            self.kernel,
            _count(count, config),
            _dim(dim, config),
            *args,
            **constants,
            **config.constants,
        )

    def choose(
        self,
        js: Any,
        count: Any,
        dim: Any,
        args: Sequence[Any],
        constants: Mapping[str, Any],
        tables: Tables,
    ) -> Choice:
        """The config for this launch (see the module docstring for the order)."""
        key = self._fast_key(js, args, constants)
        fast: tuple[Any, ...] | None = key
        try:
            found = self._fast.get(key)
        except TypeError:  # an unhashable key value: the JSON memo alone
            fast, found = None, None
        if found is not None:
            return found
        device = tables.device(js)
        values = self._key_values(args, constants)
        memo = (_canonical(device), _canonical(values))
        found = self._choices.get(memo)
        if found is not None:
            return found
        choice = self._known(tables, device, values)
        if choice is None:
            if self.frozen or env_frozen():
                choice = Choice(0, self.configs[0], "frozen")
            elif _FROZEN_HERE.get():
                return Choice(0, self.configs[0], "frozen")  # not remembered: see frozen_launches
            elif js.runtime.active_capture is not None:
                raise CaptureError(
                    f"kernel {self.name!r} has no tuned config for {values} on this device, and "
                    "a capture cannot tune",
                    fix=f"launch it once with the same key values before the capture (a "
                    f"warm-up), or freeze it ({ENV_FREEZE}=frozen or frozen=True)",
                )
            else:
                timer = self.timer or (None if js.target == "cpu" else wall_clock)
                if timer is None:
                    choice = Choice(0, self.configs[0], "untimed")
                else:
                    choice = self._tune(js, timer, count, dim, args, constants)
                    stored = self._index(
                        tables.keep(self, device, values, choice.config.plain(), choice.timings)
                        or {}
                    )
                    if stored is not None and stored != choice.index:  # another process's
                        choice = Choice(stored, self.configs[stored], "learned", choice.timings)
        self._choices[memo] = choice
        if fast is not None:
            if len(self._fast) >= _MAX_FAST:
                self._fast.clear()
            self._fast[fast] = choice
        return choice

    def _fast_key(
        self, js: Any, args: Sequence[Any], constants: Mapping[str, Any]
    ) -> tuple[Any, ...]:
        """The runtime and the key values as they are (dtype and shape of an array): a repeated
        launch finds its choice without building the device key and JSON."""
        parts: list[Any] = [js.runtime]
        for pos, name in self._slots:
            value: Any = args[pos] if pos is not None and pos < len(args) else constants.get(name)
            shape = getattr(value, "shape", None)
            if shape is None or shape == ():  # a number, a numpy scalar, a constant
                parts.append((type(value), value))
            else:
                parts.append((value.dtype, shape))
        return tuple(parts)

    def _key_values(self, args: Sequence[Any], constants: Mapping[str, Any]) -> dict[str, str]:
        runtime = {d.name: i for i, d in enumerate(self.runtime_params)}
        defaults = {d.name: d.default for d in self.kernel.const_params}
        values = {}
        for name in self.key:
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

    def _index(self, plain: Mapping[str, Any]) -> int | None:
        for i, config in enumerate(self.configs):
            if config.plain() == plain:
                return i
        return None

    def _known(
        self, tables: Tables, device: dict[str, str], values: dict[str, str]
    ) -> Choice | None:
        """The choice learned on this machine, else the shipped table's, else None."""
        index = self._index(tables.learned(self, device, values) or {})
        if index is not None:  # (a learned config that is not one of ours: tuned again)
            return Choice(index, self.configs[index], "learned")
        plain = tables.shipped(self, device, values)
        if plain is None:
            return None
        index = self._index(plain)
        if index is None:
            raise ValidationError(
                f"the autotuning table {self.table} names {plain} for kernel {self.name!r}, "
                "which is none of its configs; fix the table",
                argument="table",
            )
        return Choice(index, self.configs[index], "shipped")

    def _tune(
        self,
        js: Any,
        timer: Timer,
        count: Any,
        dim: Any,
        args: Sequence[Any],
        constants: Mapping[str, Any],
    ) -> Choice:
        """Time every config on copies of the arguments; the least median wins."""
        scratch = _scratch(js, args)
        medians: list[float | None] = []
        skipped: list[tuple[int, str]] = []
        for i, config in enumerate(self.configs):

            def run(config: Config = config) -> None:
                js.launch(
                    self.kernel,
                    _count(count, config),
                    _dim(dim, config),
                    *scratch,
                    **constants,
                    **config.constants,
                )

            try:
                for _ in range(self.warmup):
                    run()
                times = [timer(js, config, run) for _ in range(self.repeats)]
            except CONFIG_ERRORS as exc:
                skipped.append((i, f"{type(exc).__name__}: {exc}"))
                medians.append(None)
                continue
            medians.append(statistics.median(times))
        if skipped:
            why = "; ".join(f"config {i} {self.configs[i]!r}: {msg}" for i, msg in skipped)
            if len(skipped) == len(self.configs):
                raise UnsupportedError(
                    f"no config of kernel {self.name!r} runs on this device: {why}",
                    feature="autotune configs",
                    backend=js.runtime.name,
                )
            warnings.warn(
                f"autotuning kernel {self.name!r} skipped {why}", AutotuneWarning, stacklevel=4
            )
        best = min((m, i) for i, m in enumerate(medians) if m is not None)[1]
        return Choice(best, self.configs[best], "tuned", tuple(medians), tuple(skipped))


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
    """``args`` with each array replaced by a compact copy (one per argument object)."""
    copies: dict[int, Any] = {}
    out = []
    for value in args:
        tensor = getattr(value, "tensor", value)  # a JitBinding's tensor
        if hasattr(tensor, "storage") and hasattr(tensor, "shape"):
            if id(value) not in copies:
                copies[id(value)] = js.runtime.canonicalize(tensor)
            out.append(copies[id(value)])
        else:
            out.append(value)
    return out


def autotune(
    configs: Sequence[Config], key: Sequence[str] = (), **options: Any
) -> Callable[[Any], Autotuned]:
    """Decorate a ``@K.kernel`` (or a plain kernel function) with configs to tune over.

    ``key``: the parameters whose values the choice depends on (an array's dtype and shape, a
    scalar's or constant's value). ``options`` (see :class:`Autotuned`): ``frozen``; ``table``,
    the shipped table's file relative to the kernel's module (default:
    ``<module>.autotune.json`` there, if it exists); ``timer``, which replaces the clock
    (``timer(js, config, run) -> seconds``); ``warmup`` and ``repeats``.
    """
    return lambda kernel: Autotuned(kernel, configs, key, **options)


__all__ = [
    "ENV_FREEZE",
    "AutotuneWarning",
    "Autotuned",
    "Choice",
    "Config",
    "autotune",
    "frozen_launches",
]
