"""``@K.autotune``: a kernel with configs to choose from, the fastest chosen once per chip and
key values.

A config is a set of compile-time constants and a launch shape. This module is the language's
part: the declaration (:class:`Autotuned`: configs, key, options, checked when decorating) and
this process's memo of choices. Choosing at launch (the memo, the winner learned on this
machine, the shipped table, else tuning) is the JIT session's, beside the tables that persist
the winners: :mod:`tenferro_host.provider._autotuning`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import linecache
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from numbers import Integral
from pathlib import Path
from typing import Any

from ..errors import InvalidLaunchConfigError, ValidationError
from ._frontend import DeviceFunction, ParsedKernel
from ._kernel import Kernel

#: ``timer(js, config, run)``: the seconds one ``run()`` (one launch of ``config``, exactly as
#: the kernel is then launched with it) takes on the device. Tuning calls it once per config per
#: round, after every config's warm-up; the least median of its samples wins.
Timer = Callable[[Any, "Config", Callable[[], None]], float]


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


def canonical(value: Any) -> str:
    """``value`` as compact JSON with sorted keys: the form choices and identities compare in."""
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
        #: The constants the configs set (a launch may not pass them).
        self.tuned_names = frozenset(name for c in self.configs for name in c.constants)
        self.key = self._checked_key(key)
        for what, n in (("warmup", warmup), ("repeats", repeats)):
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValidationError(
                    f"autotune {what} must be an int >= 1, got {n!r}", argument=what
                )
        self.frozen, self.timer, self.warmup, self.repeats = bool(frozen), timer, warmup, repeats
        self.table = self._table_path(table)
        #: This process's choices by (device, key values) as JSON strings, and by the launch's
        #: runtime and key values as they are (filled at launch).
        self.memo: dict[tuple[str, str], Choice] = {}
        self.fast_memo: dict[tuple[Any, ...], Choice] = {}
        positions = {d.name: i for i, d in enumerate(self.runtime_params)}
        #: (position among the runtime arguments or None for a constant, name) of each key.
        self.key_slots = tuple((positions.get(name), name) for name in self.key)

    @functools.cached_property
    def identity(self) -> dict[str, str]:
        """What a learned winner holds for: the kernel, its configs, and a digest of the code
        its launches run (:func:`code_digest`), so a winner timed on other code is not reused
        untimed. Made at the first launch that looks a winner up: helpers defined after the
        kernel are found then."""
        return {
            "kernel": self.name,
            "file": self.kernel.parsed.filename,
            "code": code_digest(self.kernel.parsed),
            "configs": hashlib.sha256(
                canonical([c.plain() for c in self.configs]).encode()
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
        for name in key:
            if name not in names:
                raise ValidationError(
                    f"autotune key {name!r} is not a parameter of kernel {self.name!r} "
                    f"({', '.join(names)})",
                    argument="key",
                )
            if name in self.tuned_names:
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
        return dict(self.memo)


@functools.cache
def _dsl_digest() -> bytes:
    """A digest of the host's version and the DSL's own modules (front end, lowering, IR),
    read once per process."""
    digest = hashlib.sha256()
    with contextlib.suppress(PackageNotFoundError):
        digest.update(version("tenferro-host").encode())
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.digest()


def code_digest(parsed: ParsedKernel) -> str:
    """A digest of what decides a kernel's code: the DSL's modules and the source files of the
    kernel and of every ``K.func`` reachable from its namespace (with the module-level values
    they read). Conservative: any edit of those files tunes again; a backend's code generator
    counts through the host's version only (clear the cache after editing one)."""
    files: set[str] = set()
    todo = [parsed]
    while todo:
        found = todo.pop()
        if found.filename in files:
            continue
        files.add(found.filename)
        todo.extend(v.parsed for v in found.namespace().values() if isinstance(v, DeviceFunction))
    digest = hashlib.sha256(_dsl_digest())
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + "".join(linecache.getlines(name)).encode())
    return digest.hexdigest()[:16]


def autotune(
    configs: Sequence[Config], key: Sequence[str] = (), **options: Any
) -> Callable[[Any], Autotuned]:
    """Decorate a ``@K.kernel`` (or a plain kernel function) with configs to tune over.

    ``key``: the parameters whose values the choice depends on (an array's dtype and shape, a
    scalar's or constant's value). ``options`` (see :class:`Autotuned`): ``frozen``; ``table``,
    the shipped table's file relative to the kernel's module (default:
    ``<module>.autotune.json`` there, if it exists); ``timer``, which replaces the clock
    (``timer(js, config, run) -> seconds``, see :data:`Timer`); ``warmup``, the untimed launches
    of each config (compile, module load, caches) before any config is timed; ``repeats``, the
    rounds of timed samples, one per config per round, whose median decides.
    """
    return lambda kernel: Autotuned(kernel, configs, key, **options)


__all__ = ["AutotuneWarning", "Autotuned", "Choice", "Config", "Timer", "autotune", "canonical"]
