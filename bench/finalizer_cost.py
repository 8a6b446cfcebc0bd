"""What finalizing a storage costs: ``__del__`` against ``weakref.finalize``, per object.

The project's storages (``provider.DeviceStorage``) and borrow refs are made on every op call;
this measures making and collecting one object of the same shape (slots, a weakref slot, a
release queued on a deque when it dies) three ways: no finalizer (the floor), a one-line
``__del__`` (what the storages use), and a :func:`weakref.finalize` registered at construction.
Medians of ``--repeat`` runs of ``--number`` objects each, in ns per object, and the ratio of
``finalize`` to ``__del__``.

    python bench/finalizer_cost.py [--repeat 9] [--number 100000]
"""

from __future__ import annotations

import argparse
import statistics
import timeit
import weakref
from collections import deque

released: deque[tuple[str, int]] = deque()


class Plain:
    """The floor: no finalizer at all."""

    __slots__ = ("__weakref__", "release")

    def __init__(self, ptr: int) -> None:
        self.release = ("memory", ptr)


class WithDel(Plain):
    """A one-line ``__del__`` that queues the release, as ``DeviceStorage`` does."""

    __slots__ = ()

    def __del__(self) -> None:
        released.append(self.release)


class WithFinalize(Plain):
    """A ``weakref.finalize`` that queues the release."""

    __slots__ = ()

    def __init__(self, ptr: int) -> None:
        super().__init__(ptr)
        weakref.finalize(self, released.append, self.release)


def per_object_ns(cls: type[Plain], repeat: int, number: int) -> float:
    """Median ns to make and collect one ``cls`` object."""
    times = timeit.repeat(lambda: cls(1), number=number, repeat=repeat)
    released.clear()
    return statistics.median(times) / number * 1e9


def main() -> None:
    """Print the three costs and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--number", type=int, default=100_000)
    args = parser.parse_args()
    costs = {
        cls.__name__: per_object_ns(cls, args.repeat, args.number)
        for cls in (Plain, WithDel, WithFinalize)
    }
    for name, ns in costs.items():
        print(f"{name:>12}: {ns:8.0f} ns per object made and collected")
    print(f"finalize / __del__: {costs['WithFinalize'] / costs['WithDel']:.2f}x")


if __name__ == "__main__":
    main()
