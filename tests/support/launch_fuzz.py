"""Fuzzed launches: every wrong launch is a typed error, every right one gives the right answer.

Hypothesis draws launch configurations (each dimension at, below and above its limit, and
values that are no dimension at all), argument lists (arity off by one, tensors of other
dtypes, layouts and runtimes, scalars across and beyond their ranges, objects that are no
argument), tensor layouts (views with offsets, transposes, steps, reversed and empty views) and
session misuse (a launch after the session ended, from another thread, with a handle of
another session). A launch must either raise a ``TenferroError`` or succeed; a successful
launch whose result is checkable (a compact output covered by a 1-D launch) is compared with
numpy, and every 100 cases a known launch checks that the runtime still works. Anything else
— another exception, a wrong result, a crash, a hang (``--hang-s`` per case; faulthandler then
exits with the stacks) — fails the run, and Hypothesis shrinks it to a minimal case.

``--target dsl`` launches kernel-DSL kernels on any backend (cpu, webgpu, cuda);
``--target raw`` launches NVRTC-compiled CUDA C through the raw seam (cuda only). Raw cases
stay memory-safe by construction: the host cannot know a C parameter's type beyond its size,
so an element count never exceeds the tensors it indexes.

    python bench/fuzz_launches.py --backend cuda --target raw --examples 10000 [--json PATH]
    python bench/fuzz_launches.py --backend webgpu --target dsl --examples 10000
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import json
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.benchmarks.kernels import fill


@K.kernel
def scale(out: K.Array[K.F], x: K.Array[K.F], a: K.F):
    i = K.ABSOLUTE_POS
    if i < out.len and i < x.len:
        out[i] = a * x[i]


RAW_SOURCE = r"""
extern "C" __global__ void add(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
extern "C" __global__ void smem(float* out, int n) {
    // Takes whatever dynamic shared memory the config asks for and never touches it (a
    // config may ask for none): the fuzz is of the limits, not of the kernel.
    if (threadIdx.x == 0 && blockIdx.x == 0 && n > 0) out[0] = (float)n;
}
"""


class UntypedError(AssertionError):
    """A launch that raised something other than a TenferroError."""


@dataclass
class Tally:
    """What the cases did: launches attempted, successes, typed errors by class."""

    cases: int = 0
    launches: int = 0
    ok: int = 0
    checked: int = 0
    typed: collections.Counter[str] = field(default_factory=collections.Counter)

    def attempt(self, launch: Callable[[], Any]) -> bool:
        """Run one launch; True when it succeeded, False on a typed error, raise otherwise."""
        self.launches += 1
        try:
            launch()
        except tf.TenferroError as exc:
            self.typed[type(exc).__name__] += 1
            return False
        except Exception as exc:
            raise UntypedError(
                f"untyped {type(exc).__module__}.{type(exc).__name__}: {exc}"
            ) from exc
        self.ok += 1
        return True

    def as_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "launches": self.launches,
            "ok": self.ok,
            "checked_results": self.checked,
            "typed_errors": dict(self.typed.most_common()),
        }


# -- shared strategies ---------------------------------------------------------------------------
def around(limit: int) -> list[int]:
    """Values at, just below and just above ``limit``."""
    return [limit - 1, limit, limit + 1]


NOT_A_DIMENSION = st.sampled_from([None, 1.5, "4", -1, True, (), (1, 2, 3, 4), [[1]]])
SCALARS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 2**31, 2**63, -(2**70), True, False]),
    st.sampled_from([np.float16(1.5), np.float32(-2), np.int64(7), np.uint32(3), np.bool_(True)]),
    st.sampled_from([1j, None, "x", b"x", [1.0], object()]),
)


#: Mostly none; else a launch after the session ended, from another thread, or with a handle
#: of another (ended) session. Hypothesis favours small integers: each misuse comes often.
MISUSE = st.integers(0, 24).map(lambda k: {1: "closed", 2: "thread", 3: "old_ref"}.get(k))


def shapes(max_dims: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(0, 6), min_size=1, max_size=max_dims).map(tuple)


VIEWS = ("whole", "transpose", "step", "offset", "reverse", "empty")


def view_of(t: tf.Tensor, view: str) -> tf.Tensor:
    """A view of ``t`` of the named kind (``whole`` when ``t`` cannot take it)."""
    if view == "transpose" and t.ndim > 1:
        return t.T
    if view == "step":
        return t[::2]
    if view == "offset" and t.shape[0] > 1:
        return t[1:]
    if view == "reverse":
        return t[::-1]
    if view == "empty":
        return t[0:0]
    return t


# -- the DSL target --------------------------------------------------------------------------------
class DslFuzz:
    """Kernel-DSL launches on one runtime; ``foreign`` is a runtime of another domain."""

    def __init__(self, runtime: Any, foreign: Any, tally: Tally) -> None:
        self.rt = runtime
        self.foreign = foreign
        self.tally = tally
        self.dtypes = [
            d for d in ("float32", "float16", "float64") if d in runtime.supported_dtypes
        ]
        with runtime.session() as s, s.exec_session().jit("fuzz.limits") as js:
            self.max_grid = js.max_grid
            self.max_threads = js.max_cube_threads
            self.default_dim = js.cube_dim_1d()[0]

    def grid(self, data: st.DataObject, limits: tuple[int, ...], small: int, name: str) -> Any:
        """Mostly a small valid size; else sizes around the limits, or no size at all."""
        kind = data.draw(st.sampled_from(["small"] * 6 + ["limits", "junk"]), label=name)
        if kind == "small":
            return data.draw(st.one_of(st.just(small), st.integers(1, small)), label=name)
        if kind == "junk":
            return data.draw(NOT_A_DIMENSION, label=name)
        edges = [0, 1, 2, *{v for lim in limits for v in around(lim)}]
        dims = st.lists(st.sampled_from(edges), min_size=1, max_size=3).map(tuple)
        return data.draw(dims, label=name)

    def tensor(self, data: st.DataObject, dt: str, name: str) -> Any:
        """Mostly a tensor of ``dt`` on this runtime; else anything an argument could be."""
        kind = data.draw(
            st.sampled_from(["own"] * 12 + ["foreign", "numpy", "scalar", "binding"]), label=name
        )
        if kind == "scalar":
            return data.draw(SCALARS, label=f"{name} scalar")
        other = st.sampled_from([*self.dtypes, "int32", "bool"])
        dt = data.draw(st.one_of(*[st.just(dt)] * 6, other), label=f"{name} dtype")
        shape = data.draw(shapes(), label=f"{name} shape")
        host = (np.arange(int(np.prod(shape))) % 7).astype(dt).reshape(shape)
        if kind == "numpy":
            return host
        owner = self.foreign if kind == "foreign" else self.rt
        view = data.draw(st.sampled_from(["whole"] * 6 + list(VIEWS)), label=f"{name} view")
        t = view_of(owner.upload(host), view)
        if kind == "binding":  # a binding of a session that has ended
            with self.rt.session() as s, s.exec_session().jit("fuzz.old") as old:
                try:
                    return old.binding(t)
                except tf.TenferroError as exc:  # foreign or negative strides: refused here
                    self.tally.typed[type(exc).__name__] += 1
                    return t
        return t

    def case(self, data: st.DataObject) -> None:
        kernel = data.draw(st.sampled_from([fill, scale]), label="kernel")
        count = self.grid(data, self.max_grid, 64, "count")
        dim = self.grid(data, (self.max_threads, self.default_dim), self.default_dim, "dim")
        dt = data.draw(st.sampled_from(self.dtypes), label="dtype")
        arity = len(kernel.runtime_params) + data.draw(st.sampled_from([0] * 16 + [-1, 1]))
        args: list[Any] = [self.tensor(data, dt, f"arg{i}") for i in range(max(arity - 1, 0))]
        if arity:
            finite = st.floats(-1e4, 1e4, allow_nan=False)
            args.append(data.draw(st.one_of(finite, finite, SCALARS), label="last scalar"))
        constants = data.draw(st.sampled_from([{}] * 9 + [{"NOPE": 1}]), label="constants")
        misuse = data.draw(MISUSE, label="misuse")
        if self._too_long(count, dim):
            self.tally.typed["(skipped: valid but too much work)"] += 1
            return
        if misuse == "old_ref":
            with self.rt.session() as s, s.exec_session().jit("fuzz.old") as old:
                args = [old.binding(self.rt.zeros(dt, (4,))), *args[1:]]
        ok = False
        with self.rt.session() as s, s.exec_session().jit("fuzz.case") as js:
            if misuse == "thread":
                self._from_thread(lambda: js.launch(kernel, count, dim, *args, **constants))
                return
            if misuse == "old_ref":
                self._expect_typed(lambda: js.launch(kernel, count, dim, *args, **constants))
                return
            if misuse is None:
                ok = self.tally.attempt(lambda: js.launch(kernel, count, dim, *args, **constants))
        if misuse == "closed":
            self._expect_typed(lambda: js.launch(kernel, count, dim, *args, **constants))
            return
        if ok:
            self._check_fill(kernel, count, dim, args, constants)

    def _too_long(self, count: Any, dim: Any) -> bool:
        """A launchable grid of more than 2^25 units: correct, but minutes on a CPU adapter.

        Grids above 2^32 units stay in: they must be refused.
        """
        sizes = []
        for grid in (count, dim):
            dims = (grid,) if isinstance(grid, int) else grid
            if not isinstance(dims, tuple) or not all(type(d) is int and d >= 0 for d in dims):
                return False
            sizes.append(math.prod(dims))
        return 1 << 25 < sizes[0] * sizes[1] <= 1 << 32 and sizes[1] <= self.max_threads

    def _expect_typed(self, launch: Callable[[], Any]) -> None:
        if self.tally.attempt(launch):
            raise AssertionError("a launch misusing a session succeeded")

    def _from_thread(self, launch: Callable[[], Any]) -> None:
        box: list[BaseException | None] = [None]

        def body() -> None:
            try:
                self._expect_typed(launch)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the fuzzing thread
                box[0] = exc

        worker = threading.Thread(target=body)
        worker.start()
        worker.join()
        if box[0] is not None:
            raise box[0]

    def _check_fill(
        self, kernel: Any, count: Any, dim: Any, args: list[Any], constants: Any
    ) -> None:
        out = args[0]
        if (
            kernel is not fill
            or constants
            or not isinstance(out, tf.Tensor)
            or not out.is_compact()
        ):
            return
        if not isinstance(count, int) or not isinstance(dim, int) or count * dim < out.numel:
            return
        with np.errstate(over="ignore", invalid="ignore"):  # as the launch converts the scalar
            expected = np.full(out.shape, args[1], dtype=out.dtype.numpy)
        np.testing.assert_array_equal(out.download(), expected)
        self.tally.checked += 1

    def sanity(self) -> None:
        out = self.rt.zeros("float32", (1000,))
        with self.rt.session() as s, s.exec_session().jit("fuzz.sanity") as js:
            js.launch(fill, js.cube_count_1d(1000), js.cube_dim_1d(), out, 2.5)
        assert (out.download() == 2.5).all(), "the runtime no longer computes a fill"


# -- the raw CUDA target ---------------------------------------------------------------------------
class RawFuzz:
    """NVRTC-compiled kernels through the raw seam of one CUDA runtime."""

    def __init__(self, runtime: Any, foreign: Any, tally: Tally) -> None:
        from tenferro_host.cuda import raw

        self.raw = raw
        self.rt = runtime
        self.foreign = foreign
        self.tally = tally
        info = runtime.device_info
        self.info = info
        self.image = raw.nvrtc_compile(RAW_SOURCE, raw.NvrtcOptions(arch=info.arch))

    def dims(self, data: st.DataObject, limits: tuple[int, int, int], cap: int, name: str) -> Any:
        axes = [
            st.sampled_from([1, 1, 1, 2, 3, 32, *(v for v in around(lim) if v <= cap or v > lim)])
            for lim in limits
        ]
        tuple3 = st.tuples(*axes)
        return data.draw(st.one_of(tuple3, st.integers(1, 1024), NOT_A_DIMENSION), label=name)

    def case(self, data: st.DataObject) -> None:
        raw, info = self.raw, self.info
        smem_limits = (info.max_shared_memory_per_block, info.max_shared_memory_per_block_optin)
        # Grids at the x limit (2^31 - 1 blocks) would take seconds each: x is tried at and
        # below 2^16 and above its limit; y and z at, below and above theirs.
        n_elems = data.draw(st.integers(0, 300), label="n")
        if data.draw(st.sampled_from(["flat"] * 3 + ["edges"] * 2), label="config kind") == "flat":
            block = data.draw(st.sampled_from([32, 128, 256, 1024]), label="block")
            grid = -(-max(n_elems, 1) // block)  # covers the n elements: a checkable launch
        else:
            grid = self.dims(data, info.max_grid_dims, 1 << 16, "grid")
            block = self.dims(data, info.max_block_dims, 1 << 10, "block")
        smem = data.draw(
            st.sampled_from(
                [0, 0, 0, 1, *(v for lim in smem_limits for v in around(lim)), -1, 2**40]
            ),
            label="smem",
        )
        try:
            config = raw.LaunchConfig(grid, block, smem)
        except tf.TenferroError as exc:
            self.tally.typed[type(exc).__name__] += 1
            return
        within = all(
            g <= lim for g, lim in zip(config.grid, info.max_grid_dims, strict=True)
        ) and all(b <= lim for b, lim in zip(config.block, info.max_block_dims, strict=True))
        if within and math.prod(config.grid) * config.threads_per_block > 1 << 26:
            self.tally.typed["(skipped: valid but too much work)"] += 1
            return
        kernel = data.draw(st.sampled_from(["add", "smem"]), label="kernel")
        misuse = data.draw(MISUSE, label="misuse")
        stale = None
        if misuse == "old_ref":  # a ref of a session that ended (sessions do not nest)
            with self.rt.session() as s, tf.cuda.exec_session(s).raw("fuzz.old") as old:
                stale = old.tensor(self.rt.zeros("float32", (4,)))
        with self.rt.session() as s, tf.cuda.exec_session(s).raw("fuzz.raw") as rs:
            fn = rs.load_cubin(self.image.data).function(kernel)
            args = self.arguments(data, rs, kernel, n_elems)
            if misuse == "thread":
                done: list[bool] = []
                worker = threading.Thread(
                    target=lambda: done.append(
                        self.tally.attempt(lambda: rs.launch(fn, config, args))
                    )
                )
                worker.start()
                worker.join()
                if done != [False]:
                    raise AssertionError(
                        f"a launch from another thread did not raise typed: {done}"
                    )
                return
            if stale is not None:
                args = [stale, *args[1:]]
                if self.tally.attempt(lambda: rs.launch(fn, config, args)):
                    raise AssertionError("a launch with a ref of an ended session succeeded")
                return
            ok = self.tally.attempt(lambda: rs.launch(fn, config, args))
        if misuse == "closed":
            if self.tally.attempt(lambda: rs.launch(fn, config, args)):
                raise AssertionError("a launch on an ended raw session succeeded")
            return
        if ok and misuse is None and kernel == "add":
            self.check_add(config, args)

    def arguments(self, data: st.DataObject, rs: Any, kernel: str, n_elems: int) -> list[Any]:
        raw = self.raw
        want = 4 if kernel == "add" else 2
        arity = want + data.draw(st.sampled_from([0] * 16 + [-1, 1]), label="arity delta")
        self.inputs: list[np.ndarray] = []
        args: list[Any] = []
        for slot in range(max(arity, 0)):
            if slot == want - 1:  # the count
                args.append(
                    data.draw(
                        st.sampled_from(
                            [raw.i32(n_elems)] * 12
                            + [raw.i64(n_elems), raw.u32(n_elems), n_elems, 1.0, None]
                        ),
                        label="n",
                    )
                )
                continue
            args.append(self.tensor_arg(data, rs, slot == 0, n_elems, f"arg{slot}"))
        return args

    def tensor_arg(self, data: st.DataObject, rs: Any, write: bool, n_elems: int, name: str) -> Any:
        raw = self.raw
        kind = data.draw(
            st.sampled_from(["ref"] * 16 + ["strided"] * 2 + ["foreign", "cpu", "numpy", "scalar"]),
            label=name,
        )
        # Never smaller than n elements of 4 bytes: what the kernel indexes must exist.
        dt = data.draw(st.sampled_from(["float32"] * 8 + ["int32", "float64", "int64"]))
        extra = data.draw(st.integers(0, 5), label=f"{name} extra")
        cols = data.draw(st.sampled_from([1, 1, 2, 3]), label=f"{name} cols")
        rows = -(-(n_elems + extra) // cols)
        host = (np.arange(rows * cols) % 11).astype(dt).reshape(rows, cols, order="F")
        self.inputs.append(host)
        if kind == "numpy":
            return host
        if kind == "scalar":  # never 8 bytes: the launch would take it for a pointer
            return data.draw(st.sampled_from([raw.f32(1.0), raw.i32(3), raw.f16(1.0), 7, None]))
        owner = {"foreign": self.foreign, "cpu": self.rt.host.backend("cpu")}.get(kind, self.rt)
        t = whole = owner.upload(host)
        view = data.draw(st.sampled_from(["whole"] * 8 + ["transpose", "offset", "empty"]))
        if view == "transpose" and t.ndim > 1:
            t = t.T
        elif view == "offset" and rows > 1:
            t = t[1:]
        elif view == "empty":
            t = t[0:0]
        if t.offset * t.dtype.itemsize + 4 * n_elems > t.storage.nbytes:
            t = whole  # a pointer to the view's first element would reach past the storage
        if kind == "strided":
            return rs.tensor_strided_mut(t) if write else rs.tensor_strided(t)
        try:
            return rs.tensor_mut(t) if write else rs.tensor(t)
        except tf.TenferroError as exc:  # refused at borrow: the launch gets the raw tensor
            self.tally.typed[type(exc).__name__] += 1
            return t

    def check_add(self, config: Any, args: list[Any]) -> None:
        out, a, b, n = args
        n = n.value if hasattr(n, "value") else n
        refs = (out, a, b)
        if not all(hasattr(r, "tensor") for r in refs) or config.grid[0] * config.block[0] < n:
            return
        # The kernel indexes from the ref's pointer: the view's first element when the ref's
        # offset is 0 (tensor/tensor_mut, or a strided ref of an offset-0 view).
        if any(r.offset != 0 for r in refs):
            return
        tensors = [r.tensor for r in refs]
        if not all(t.dtype.name == "float32" and t.is_compact() and t.numel >= n for t in tensors):
            return
        got = tensors[0].download().reshape(-1, order="F")[:n]
        lhs, rhs = (t.download().reshape(-1, order="F")[:n] for t in tensors[1:])
        np.testing.assert_array_equal(got, lhs + rhs)
        self.tally.checked += 1

    def sanity(self) -> None:
        raw = self.raw
        a = self.rt.upload(np.arange(256, dtype=np.float32))
        with self.rt.session() as s, tf.cuda.exec_session(s).raw("fuzz.sanity") as rs:
            out = rs.alloc_output(tf.float32, (256,))
            fn = rs.load_cubin(self.image.data).function("add")
            rs.launch(
                fn,
                raw.LaunchConfig.flat(256, 128),
                [rs.tensor_mut(out), rs.tensor(a), rs.tensor(a), raw.i32(256)],
            )
        assert (out.download() == 2 * np.arange(256)).all(), "the runtime no longer adds"


# -- driver ----------------------------------------------------------------------------------------
def fuzz(
    backend: str, target: str, examples: int, seed: int = 0, hang_s: float = 60.0
) -> dict[str, Any]:
    """Run ``examples`` cases; the tally as a dict (raises on the first untyped or wrong case)."""
    host = tf.Host()
    rt = host.backend(backend)
    foreign = host.new_backend(backend)  # same device, another allocation domain
    tally = Tally()
    runner = (RawFuzz if target == "raw" else DslFuzz)(rt, foreign, tally)
    faulthandler.enable()

    @hypothesis_seed(seed)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def one_case(data: st.DataObject) -> None:
        faulthandler.dump_traceback_later(hang_s, exit=True)
        try:
            tally.cases += 1
            try:
                runner.case(data)
            except tf.TenferroError as exc:  # refused while making the arguments
                tally.typed[f"{type(exc).__name__} (before the launch)"] += 1
            if tally.cases % 100 == 0:
                runner.sanity()
        finally:
            faulthandler.cancel_dump_traceback_later()

    start = time.perf_counter()
    one_case()
    runner.sanity()
    rt.synchronize()
    result = {"backend": rt.name, "target": target, "seed": seed, **tally.as_dict()}
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--target", choices=["dsl", "raw"], default="dsl")
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--hang-s", type=float, default=60.0, help="per case; then exit with stacks"
    )
    parser.add_argument("--json", help="also write the tally to this file")
    args = parser.parse_args()
    try:
        result = fuzz(args.backend, args.target, args.examples, args.seed, args.hang_s)
    except AssertionError as exc:  # Hypothesis printed the minimal failing case above
        result = {"backend": args.backend, "target": args.target, "failure": str(exc)}
        status = 1
    else:
        status = 0
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return status


if __name__ == "__main__":
    sys.exit(main())
