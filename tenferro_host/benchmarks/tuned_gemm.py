"""A GEMM kernel of the benchmarks with its block configs: launched in one config, or
autotuned over them (``@K.autotune`` keyed on the shapes of ``a`` and ``b``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .. import kernel as K


@dataclass(frozen=True)
class ConfiguredGemm:
    """``kernel(c, a, b, **config.constants)`` computes ``c = a @ b`` (m x n x k) on ``count(m,
    n, k, config)`` cubes of ``config.dim`` units; ``tuned`` is it autotuned over ``configs``.
    A count raises InvalidLaunchConfigError for a shape its config cannot compute (the tuner
    then skips that config, with a warning)."""

    kernel: K.Kernel
    configs: tuple[K.Config, ...]
    count: Callable[[int, int, int, K.Config], tuple[int, int]]

    @cached_property
    def tuned(self) -> K.Autotuned:
        """The kernel autotuned with the default options: one object, so the winner it learns
        at a shape's first launch serves every later launch."""
        return self.autotuned()

    def autotuned(self, **options: Any) -> K.Autotuned:
        """The kernel autotuned over :attr:`configs` (``options`` go to :func:`K.autotune`)."""
        return K.autotune(configs=self.configs, key=["a", "b"], **options)(self.kernel)

    def launch(self, js: Any, c: Any, a: Any, b: Any, config: K.Config) -> None:
        """``c = a @ b`` in ``config`` in the JIT session ``js``."""
        m, n = c.shape
        count = self.count(m, n, a.shape[1], config)
        js.launch(self.kernel, count, config.dim, c, a, b, **config.constants)

    def launch_tuned(
        self, js: Any, c: Any, a: Any, b: Any, tuned: K.Autotuned | None = None
    ) -> None:
        """``c = a @ b`` with ``tuned`` (default :attr:`tuned`): the config tuned at its first
        launch per shape."""
        m, n = c.shape
        k = a.shape[1]
        kernel = self.tuned if tuned is None else tuned
        js.launch(kernel, lambda config: self.count(m, n, k, config), None, c, a, b)


__all__ = ["ConfiguredGemm"]
