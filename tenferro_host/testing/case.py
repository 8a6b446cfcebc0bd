"""One conformance case and its outcome: the unit the suite lists, runs and reports.

A case's body raises :class:`CheckFailure` when the op does not do what it declares and
:class:`CaseSkipped` when the case cannot run here; anything else it raises is an ``error``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("passed", "failed", "skipped", "error")


class CheckFailure(AssertionError):  # noqa: N818 - public API, a failed check
    """A case found the op not doing what it declares."""


class CaseSkipped(Exception):  # noqa: N818 - public API, a skip signal, not an error
    """A case cannot run here (backend unavailable, NVRTC missing ...); the reason says why."""


@contextmanager
def poison_fresh_memory(enabled: bool = True) -> Iterator[None]:
    """Fill fresh CPU storage (``empty``, ``alloc_output``) with NaN / 0xA5 bytes meanwhile."""
    from .._cpu import CpuRuntime

    before = CpuRuntime.poison_fresh_memory
    CpuRuntime.poison_fresh_memory = enabled
    try:
        yield
    finally:
        CpuRuntime.poison_fresh_memory = before


@dataclass(frozen=True)
class Settings:
    """What every case of one run shares: tolerance overrides and the attributes to pass
    (the op's ``sample_attributes`` when the caller gives none)."""

    rtol: float | None = None
    atol: float | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """The result of one case."""

    case: Case
    status: str  # one of STATUSES
    message: str = ""
    seconds: float = 0.0

    @property
    def bad(self) -> bool:
        """The case failed or raised (what a failures-only view shows)."""
        return self.status in ("failed", "error")


@dataclass(frozen=True)
class Case:
    """One check of one op: ``check`` for ``variant`` on ``backend`` (``none``: GPU-less)."""

    op: str
    check: str
    variant: str
    backend: str
    body: Callable[[], None] = field(repr=False, compare=False)
    unavailable: str | None = None  # why the backend cannot run here (known before running)

    @property
    def id(self) -> str:
        """The case's test id: ``op-variant-backend-check``."""
        return f"{self.op}-{self.variant}-{self.backend}-{self.check}"

    def run(self) -> Outcome:
        """Run the case; never raises except KeyboardInterrupt."""
        start = time.perf_counter()
        try:
            if self.unavailable is not None:
                raise CaseSkipped(self.unavailable)
            with poison_fresh_memory():
                self.body()
        except CheckFailure as exc:
            return Outcome(self, "failed", str(exc), time.perf_counter() - start)
        except CaseSkipped as exc:
            return Outcome(self, "skipped", str(exc), time.perf_counter() - start)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - an op's SystemExit must not end the run
            message = f"raised {type(exc).__name__}: {exc}"
            return Outcome(self, "error", message, time.perf_counter() - start)
        return Outcome(self, "passed", "", time.perf_counter() - start)


__all__ = [
    "STATUSES",
    "Case",
    "CaseSkipped",
    "CheckFailure",
    "Outcome",
    "Settings",
    "poison_fresh_memory",
]
