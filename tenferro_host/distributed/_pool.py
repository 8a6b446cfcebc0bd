"""A pool of host actors: one per GPU of a Ray cluster (or per node for CPU/WebGPU), placed by
Ray — its resources, an optional placement group, its accelerator types — and by what each actor
reports it can run.

The caller owns the Ray connection (``ray.init`` before, ``ray.shutdown`` after); the pool owns
its actors (and its placement group) and ends them on ``shutdown`` (or leaving its ``with``
block). A sub-pool from ``where``, or a pool a Ray task was given, shares the actors and owns
none.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .._host import parse_backend_name
from ..errors import (
    CallTimeoutError,
    HostActorDiedError,
    RuntimeStateError,
    UnsupportedError,
    ValidationError,
)
from ._remote import (
    CONTROL_GROUP,
    DEFAULT_TIMEOUT_S,
    Pending,
    RemoteHost,
    connected_ray,
    import_ray,
    remaining,
    start_actor,
    wait,
    wait_any,
)
from ._worker import ABORTED, TensorHandle
from .caps import ActorCaps, arch_resource
from .collectives import DEFAULT_BINDING

#: Seconds ``start`` waits for every actor to be placed and to have made its Host.
DEFAULT_START_TIMEOUT_S = 120.0
#: Seconds a failed collective waits for every rank to confirm its communicator was aborted,
#: and then for the calls that abort ended.
ABORT_TIMEOUT_S = 30.0
#: Seconds it waits for the answer of a rank whose communicator was idle (its collective may
#: have answered just now) before it names that rank as one that did not finish.
ANSWER_GRACE_S = 2.0
#: ``collective_abort`` answers of a rank whose join or collective had begun.
BEGAN = ("in flight", "ended")
#: Placement group strategies (Ray's): one node for an NVLink pool, or across nodes.
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
#: Ray actor options ``start`` passes through to every actor.
ACTOR_OPTIONS = (
    "max_restarts",
    "max_task_retries",
    "runtime_env",
    "name",
    "namespace",
    "lifetime",
    "max_concurrency",
)


def _placements(ray: Any, kind: str, actors: int | None) -> list[dict[str, Any]]:
    """Ray options of each actor: one per GPU for CUDA, one per alive node otherwise."""
    if actors is not None:
        if actors < 1:
            raise ValidationError(
                f"a pool needs at least one actor, got {actors}", argument="actors"
            )
        return [{} for _ in range(actors)]
    if kind == "cuda":
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus == 0:
            raise UnsupportedError(
                "the Ray cluster has no GPU now: start its nodes with GPUs, or pass actors=N "
                "(an autoscaler adds nodes for actors that ask, not for a count of none)",
                backend="cuda",
                feature="placement",
            )
        return [{} for _ in range(gpus)]
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return [
        {"scheduling_strategy": NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)}
        for node in ray.nodes()
        if node["Alive"]
    ]


def _actor_options(options: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """``options`` for each of ``count`` actors: a ``name`` gets the actor's index."""
    unknown = sorted(set(options) - set(ACTOR_OPTIONS))
    if unknown:
        raise ValidationError(
            f"actor option(s) {', '.join(unknown)} are not passed through; "
            f"these are: {', '.join(ACTOR_OPTIONS)}",
            argument="actor_options",
        )
    each = []
    for i in range(count):
        mine = dict(options)
        if "name" in mine and count > 1:
            mine["name"] = f"{mine['name']}-{i}"
        each.append(mine)
    return each


def _reserve(
    ray: Any, bundle: dict[str, float], count: int, strategy: str, timeout_s: float
) -> Any:
    """A placement group of ``count`` bundles, ready; a CallTimeoutError (the group removed)
    when Ray — or its autoscaler — cannot make it within ``timeout_s``."""
    if strategy not in STRATEGIES:
        raise ValidationError(
            f"placement strategy {strategy!r} is not one of {', '.join(STRATEGIES)}",
            argument="strategy",
        )
    wanted = {k: v for k, v in bundle.items() if v}
    if not wanted:
        raise ValidationError(
            "a placement group reserves resources, and each actor asks for none: pass "
            "num_gpus, num_cpus or resources",
            argument="strategy",
        )
    group = ray.util.placement_group([wanted] * count, strategy=strategy)
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        ray.util.remove_placement_group(group)
        raise CallTimeoutError(
            f"Ray did not reserve {count} bundle(s) of {wanted} ({strategy}) within "
            f"{timeout_s} s: the cluster (with what its autoscaler adds) does not offer them "
            "now; `ray status` shows what it has",
            timeout_s=timeout_s,
        )
    return group


class HostPool:
    """Host actors, one per GPU (or node), and the work mapped over them."""

    def __init__(
        self, hosts: Sequence[RemoteHost], *, owner: bool = False, group: Any = None
    ) -> None:
        self.hosts = list(hosts)
        self._owner = owner
        self._group = group
        self._closed = False

    def __reduce__(self) -> tuple[Any, ...]:
        # A Ray task given the pool calls its actors and owns none of them.
        return (HostPool, (self.hosts,))

    @classmethod
    def start(
        cls,
        backend: str | Sequence[str] = "cuda",
        *,
        actors: int | None = None,
        num_gpus: float | None = None,
        num_cpus: float = 0,
        arch: str | None = None,
        accelerator_type: str | None = None,
        resources: dict[str, float] | None = None,
        strategy: str | None = None,
        actor_options: dict[str, Any] | None = None,
        probe_p2p: bool = False,
        timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> HostPool:
        """Start one actor per GPU (``backend="cuda"``: Ray gives each its own GPU, seen as
        ``cuda:0``), or one per node for ``cpu``/``webgpu``, or ``actors`` of them; a list of
        backends starts one actor per entry (``["cpu", "webgpu"]``).

        ``num_gpus`` is what each actor asks Ray for (default 1 for CUDA, 0 otherwise);
        ``accelerator_type`` (Ray's: ``"H100"``) or ``arch`` (``"sm_90"``, the custom resource
        of ``node_resources``) places actors on such GPUs; ``resources`` adds custom Ray
        resources. ``strategy`` reserves the actors as one placement group (``"STRICT_PACK"``:
        one node, e.g. an NVLink pool; ``"SPREAD"``: across nodes), removed with the pool.
        ``actor_options`` pass through to Ray (``max_restarts``, ``max_task_retries``,
        ``runtime_env`` so op packages reach every node, ``name``, ``namespace``,
        ``lifetime``). Feasibility is Ray's (and its autoscaler's): actors not placed and
        ready within ``timeout_s`` are a ``CallTimeoutError``, and none is left behind.
        """
        ray = import_ray()
        if not ray.is_initialized():
            raise RuntimeStateError(
                "Ray is not initialized: call ray.init() (ray.init(address='auto') on a cluster) "
                "before HostPool.start, and ray.shutdown() after the pool's shutdown"
            )
        if isinstance(backend, str):
            kind, index = parse_backend_name(backend)
            if index != 0:
                raise ValidationError(
                    f"each actor owns device 0 of its process (Ray gives an actor its own GPU as "
                    f"cuda:0); pass {kind!r}, not {backend!r}",
                    argument="backend",
                )
            placements = [(f"{kind}:0", o) for o in _placements(ray, kind, actors)]
        else:
            placements = [("{}:{}".format(*parse_backend_name(b)), {}) for b in backend]
            kind = parse_backend_name(placements[0][0])[0] if placements else ""
        if not placements:
            raise ValidationError("a pool needs at least one backend", argument="backend")
        gpus = num_gpus if num_gpus is not None else (1.0 if kind == "cuda" else 0.0)
        wanted = dict(resources or {})
        if arch is not None:
            wanted[arch_resource(arch)] = wanted.get(arch_resource(arch), 0.0) + 1.0
        each = _actor_options(dict(actor_options or {}), len(placements))
        group = None
        if strategy is not None:
            bundle = {"GPU": gpus, "CPU": num_cpus, **wanted}
            group = _reserve(ray, bundle, len(placements), strategy, timeout_s)
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            placements = [
                (name, {"scheduling_strategy": PlacementGroupSchedulingStrategy(group, i)})
                for i, (name, _) in enumerate(placements)
            ]
        options = [
            {
                "num_gpus": gpus,
                "num_cpus": num_cpus,
                "resources": wanted or None,
                **({"accelerator_type": accelerator_type} if accelerator_type else {}),
                **placed,
                **mine,
            }
            for (_, placed), mine in zip(placements, each, strict=True)
        ]
        started = [
            start_actor(ray, name, o, probe_p2p)
            for (name, _), o in zip(placements, options, strict=True)
        ]
        pings = [Pending(a.ping.remote(), f"actor {i}", "start") for i, a in enumerate(started)]
        try:
            ids = wait(pings, timeout_s)
        except BaseException:
            for actor in started:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
            if group is not None:
                ray.util.remove_placement_group(group)
            raise
        hosts = [
            RemoteHost(a, i, name, o, probe_p2p)
            for a, i, (name, _), o in zip(started, ids, placements, options, strict=True)
        ]
        return cls(hosts, owner=True, group=group)

    # -- the actors ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.hosts)

    def __iter__(self) -> Iterator[RemoteHost]:
        return iter(self.hosts)

    def __getitem__(self, index: int) -> RemoteHost:
        return self.hosts[index]

    def owner_of(self, tensor: str | TensorHandle) -> RemoteHost:
        """The actor that holds ``tensor`` (its address, ``ray.get(ref)``, or its handle)."""
        handle = TensorHandle.parse(tensor) if isinstance(tensor, str) else tensor
        host = next((h for h in self.hosts if h.id == handle.owner), None)
        if host is None:
            raise ValidationError(
                f"tensor {handle.call}.{handle.output} belongs to host actor {handle.owner}, "
                "which is not in this pool",
                argument="tensor",
            )
        return host

    def caps(self, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> list[ActorCaps]:
        """Every actor's caps, asked in parallel (once)."""
        missing = [h for h in self.hosts if h._caps is None]
        for host, caps in zip(
            missing, wait([h.submit("caps") for h in missing], timeout_s), strict=True
        ):
            host._caps = caps
        return [h.caps() for h in self.hosts]

    def where(
        self,
        predicate: Callable[[ActorCaps], bool] | None = None,
        *,
        arch: str | None = None,
        op: str | None = None,
        kind: str | None = None,
    ) -> HostPool:
        """The actors whose caps match: ``arch`` (``"sm_90"``), ``op`` runnable on ``kind``
        (default each actor's own backend kind, e.g. only where its cuda variant can run),
        any ``predicate``. Empty matches are a ``UnsupportedError``: nothing to place on."""

        def matches(c: ActorCaps) -> bool:
            return (
                (arch is None or c.arch == arch)
                and (op is None or c.can_run(op, kind))
                and (predicate is None or predicate(c))
            )

        chosen = [h for h, c in zip(self.hosts, self.caps(), strict=True) if matches(c)]
        if not chosen:
            wanted = ", ".join(
                f"{k}={v!r}" for k, v in (("arch", arch), ("op", op), ("kind", kind)) if v
            )
            raise UnsupportedError(
                f"no actor of the pool matches ({wanted or 'predicate'}); "
                "see pool.caps() for what each offers",
                feature="placement",
            )
        return HostPool(chosen, owner=False)

    # -- work ----------------------------------------------------------------------------------
    def map(
        self,
        op: str,
        shards: Iterable[Any],
        *,
        in_flight: int = 4,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        **attrs: Any,
    ) -> list[Any]:
        """Run ``op`` on every shard, each on the actor with the fewest calls in flight (as
        ``ray.util.ActorPool`` does), at most ``in_flight`` per actor: a long or lazy sequence
        of shards is read as actors free up, not all at once.

        A shard is an array or a tuple of arrays (the op's tensor inputs), uploaded to its
        actor with the call; the results are refs, in shard order, whose tensors stay on their
        actors (``gather`` downloads them) while the refs live. ``timeout_s`` bounds the whole.
        """
        if in_flight < 1:
            raise ValidationError(
                f"in_flight is the calls each actor may have at once, at least 1, got {in_flight}",
                argument="in_flight",
            )
        ray = connected_ray()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        busy: dict[Any, tuple[Pending, int]] = {}  # ref -> its call, the actor running it
        load = [0] * len(self.hosts)
        calls = []
        for shard in shards:
            while len(busy) >= in_flight * len(self.hosts):
                left_s = remaining(deadline)
                for done in wait_any(ray, [p for p, _ in busy.values()], left_s):
                    load[busy.pop(done.ref)[1]] -= 1
            actor = load.index(min(load))
            arrays = shard if isinstance(shard, tuple) else (shard,)
            pending = self.hosts[actor].map_call(op, arrays, attrs)
            busy[pending.ref] = (pending, actor)
            load[actor] += 1
            calls.append(pending)
        left_s = remaining(deadline)
        return wait(calls, left_s)

    def gather(
        self, tensors: Sequence[Any], timeout_s: float | None = DEFAULT_TIMEOUT_S
    ) -> list[np.ndarray]:
        """Each tensor's values (refs, Pendings, addresses or handles), downloaded from its
        actor in parallel, in order."""
        refs = [t.ref if isinstance(t, Pending) else t for t in tensors]
        pending = [r for r in refs if not isinstance(r, str | TensorHandle)]
        found = iter(wait(pending, timeout_s))  # a ref's value: its tensor's address
        owners = [
            self.owner_of(r if isinstance(r, str | TensorHandle) else next(found)) for r in refs
        ]
        return wait([o.submit("download", r) for o, r in zip(owners, refs, strict=True)], timeout_s)

    # -- collectives ---------------------------------------------------------------------------
    def init_collectives(
        self, binding: str = DEFAULT_BINDING, timeout_s: float | None = DEFAULT_TIMEOUT_S
    ) -> None:
        """One NCCL communicator over the pool's actors, actor ``i`` being rank ``i``: rank 0
        makes the unique id, Ray carries it to every actor, and all join at once.

        Ranks that have not joined within ``timeout_s`` (dead, hung, busy with another call)
        are a ``CallTimeoutError`` naming them; a rank that fails or dies raises its own error.
        Either way every rank's join is aborted first, so none stays blocked waiting for the
        others: call it again (after ``RemoteHost.restart()`` of an actor that stays hung). Each
        rank's communicator also gives up on its own after ``timeout_s``, in this join and in
        each collective until NCCL took it."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        unique_id = self.hosts[0].submit("collective_unique_id", binding).result(timeout_s)
        left_s = remaining(deadline)
        n = len(self.hosts)
        calls = [
            h.submit("collective_init", unique_id, n, rank, binding, left_s)
            for rank, h in enumerate(self.hosts)
        ]
        self._on_every_rank("init_collectives", calls, timeout_s, left_s, unique_id)

    def collective(
        self,
        name: str,
        handles: Sequence[Any],
        *,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        **kwargs: Any,
    ) -> list[Any]:
        """Collective ``name`` (``all_reduce``, ``all_gather``, ``broadcast``) over the pool,
        ``handles[i]`` (a ref, or an address or handle) held by rank ``i``; one result ref per
        rank.

        A rank that fails, dies or has not taken the call within ``timeout_s`` leaves the
        others waiting for it on the device: every rank's communicator is aborted then (the
        results are lost) and the error says which ranks did not finish; call
        ``init_collectives`` again."""
        if len(handles) != len(self.hosts):
            raise ValidationError(
                f"{name} takes one handle per rank ({len(self.hosts)}), got {len(handles)}",
                argument="handles",
            )
        calls = [
            h.collective_call(name, t, kwargs) for h, t in zip(self.hosts, handles, strict=True)
        ]
        return self._on_every_rank(name, calls, timeout_s, timeout_s, None)

    def _on_every_rank(
        self,
        what: str,
        calls: list[Pending],
        timeout_s: float | None,
        left_s: float | None,
        unique_id: bytes | None,
    ) -> list[Any]:
        """Every rank's result of ``what`` (given ``timeout_s``, ``left_s`` of it left); on
        the first failure or the timeout, the communicator of ``unique_id`` (None: each actor's
        own) is aborted on every rank first."""
        try:
            return wait(calls, left_s)
        except Exception as exc:
            ray = import_ray()
            if not ray.is_initialized():
                raise  # the actors went with the connection
            refs = [c.ref for c in calls]
            _, running = ray.wait(refs, num_returns=len(refs), timeout=0)
            states = self._abort_collectives(unique_id)
            # A rank whose join or collective began has done its part (its call ends with the
            # abort, if not before); one still running after that, or after a moment for an
            # idle one's answer on its way, is dead, hung or busy: the others waited for it.
            began = [c.ref for c, st in zip(calls, states, strict=True) if st in BEGAN]
            for group, bound in (
                ([r for r in began if r in running], ABORT_TIMEOUT_S),
                ([r for r in running if r not in began], ANSWER_GRACE_S),
            ):
                if group:
                    ray.wait(group, num_returns=len(group), timeout=bound)
            _, still = ray.wait(refs, num_returns=len(refs), timeout=0)
            late = [r for r, c in enumerate(calls) if c.ref in running]
            stuck = [r for r, c in enumerate(calls) if c.ref in still] or late
            for ref in set(refs) - set(still):  # their errors are this one: taken here, or
                with contextlib.suppress(Exception):  # Ray logs each as an unhandled error
                    ray.get(ref, timeout=0)
            aborted = "every rank's communicator was aborted, so no rank waits for them"
            failed = [
                f"rank {r} ({h.id}): {state}"
                for r, (h, state) in enumerate(zip(self.hosts, states, strict=True))
                if state not in ABORTED
            ]
            if failed:
                aborted += "; not on " + "; ".join(failed)
            if isinstance(exc, CallTimeoutError) and stuck:
                named = ", ".join(f"rank {r} ({calls[r].actor})" for r in stuck)
                raise CallTimeoutError(
                    f"{what}: {named} did not finish within {timeout_s} s (dead, hung or busy "
                    f"with another call); {aborted}. Call init_collectives again "
                    "(RemoteHost.restart() an actor that stays hung)",
                    actor=", ".join(calls[r].actor for r in stuck),
                    timeout_s=timeout_s,
                ) from None
            exc.add_note(f"{what} failed on a rank: {aborted}; call init_collectives again")
            raise

    def _abort_collectives(self, unique_id: bytes | None) -> list[str]:
        """Abort the communicator on every actor through its control concurrency group (run
        while the actor's main thread is blocked in a join or collective): each rank's
        ``collective_abort`` answer, or why it gave none."""
        ray = connected_ray()
        refs = [
            h.actor.collective_abort.options(concurrency_group=CONTROL_GROUP).remote(unique_id)
            for h in self.hosts
        ]
        ray.wait(refs, num_returns=len(refs), timeout=ABORT_TIMEOUT_S)
        states = []
        for host, ref in zip(self.hosts, refs, strict=True):
            try:
                state = str(Pending(ref, host.id, "collective_abort").result(0))
            except HostActorDiedError:
                state = "its actor died"
            except CallTimeoutError:
                state = f"no answer within {ABORT_TIMEOUT_S} s"
            except Exception as exc:  # noqa: BLE001 - reported with the error being raised
                state = f"{type(exc).__name__}: {exc}"
            states.append(state)
        return states

    # -- lifetime ------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """End the pool's actors (their tensors go with them) and its placement group; a
        sub-pool ends none. After ``ray.shutdown()`` there is nothing left to end: a no-op.
        Every actor is tried; what could not be ended is one RuntimeStateError after."""
        if self._closed:
            return
        self._closed = True
        if not self._owner:
            return
        ray = import_ray()
        if not ray.is_initialized():
            return  # the cluster's actors ended with the connection
        failed = []
        for host in self.hosts:
            try:
                ray.kill(host.actor)
            except Exception as exc:  # noqa: BLE001 - reported after every actor was tried
                failed.append(f"{host.id}: {type(exc).__name__}: {exc}")
        if self._group is not None:
            with contextlib.suppress(Exception):  # removed with the cluster
                ray.util.remove_placement_group(self._group)
        if failed:
            raise RuntimeStateError(
                "the pool could not end these host actors (end them with ray.kill, or restart "
                "the cluster): " + "; ".join(failed)
            )

    def __enter__(self) -> HostPool:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            self.shutdown()
        except Exception as failure:
            if exc is None:
                raise
            exc.add_note(f"and leaving the pool's block then failed: {failure}")


__all__ = ["DEFAULT_START_TIMEOUT_S", "HostPool"]
