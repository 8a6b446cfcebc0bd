"""A pool of host actors: one per GPU of a Ray cluster (or per node for CPU/WebGPU), placed by
resources and by what each actor reports it can run.

The caller owns the Ray connection (``ray.init`` before, ``ray.shutdown`` after); the pool owns
its actors and kills them on ``shutdown`` (or leaving its ``with`` block). A sub-pool from
``where`` shares its parent's actors and owns none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .._host import parse_backend_name
from ..errors import RuntimeStateError, UnsupportedError, ValidationError
from ._remote import DEFAULT_TIMEOUT_S, Pending, RemoteHost, import_ray, wait
from ._worker import HostWorker, TensorHandle
from .caps import ActorCaps, arch_resource
from .collectives import DEFAULT_BINDING

#: Seconds ``start`` waits for every actor to be placed and to have made its Host.
DEFAULT_START_TIMEOUT_S = 120.0


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
                "the Ray cluster has no GPU: start its nodes with GPUs, or pass actors=N",
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


def _check_feasible(ray: Any, resources: dict[str, float], count: int) -> None:
    """Refuse at once what no set of nodes offers, instead of leaving actors pending forever."""
    total = ray.cluster_resources()
    for name, amount in resources.items():
        if total.get(name, 0.0) < amount * count:
            raise UnsupportedError(
                f"{count} actor(s) need {amount * count:g} of Ray resource {name!r}, the cluster "
                f"has {total.get(name, 0.0):g}; start nodes that offer it (for GPU archs: "
                "ray start --resources with tenferro_host.distributed.node_resources(host))",
                feature="placement",
            )


class HostPool:
    """Host actors, one per GPU (or node), and the work mapped over them."""

    def __init__(self, hosts: Sequence[RemoteHost], *, owner: bool) -> None:
        self.hosts = list(hosts)
        self._owner = owner
        self._by_id = {h.id: h for h in self.hosts}
        self._closed = False

    @classmethod
    def start(
        cls,
        backend: str | Sequence[str] = "cuda",
        *,
        actors: int | None = None,
        num_gpus: float | None = None,
        num_cpus: float = 0,
        arch: str | None = None,
        resources: dict[str, float] | None = None,
        probe_p2p: bool = False,
        timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> HostPool:
        """Start one actor per GPU (``backend="cuda"``: Ray gives each its own GPU, seen as
        ``cuda:0``), or one per node for ``cpu``/``webgpu``, or ``actors`` of them; a list of
        backends starts one actor per entry (``["cpu", "webgpu"]``).

        ``num_gpus`` is what each actor asks Ray for (default 1 for CUDA, 0 otherwise); ``arch``
        (e.g. ``"sm_90"``) asks for one of the node's GPUs of that arch (see
        ``node_resources``); ``resources`` adds custom Ray resources. What the cluster does not
        have is refused at once; actors not placed and ready within ``timeout_s`` are an
        ``ActorUnavailableError``.
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
        _check_feasible(ray, {"GPU": gpus, "CPU": num_cpus, **wanted}, len(placements))
        actor_class = ray.remote(max_restarts=0, max_task_retries=0)(HostWorker)
        started = [
            actor_class.options(
                num_gpus=gpus, num_cpus=num_cpus, resources=wanted or None, **options
            ).remote(name, probe_p2p=probe_p2p)
            for name, options in placements
        ]
        pings = [Pending(a.ping.remote(), f"actor {i}", "start") for i, a in enumerate(started)]
        try:
            ids = wait(pings, timeout_s)
        except BaseException:
            for actor in started:
                ray.kill(actor)
            raise
        return cls(
            [
                RemoteHost(a, i, name)
                for a, i, (name, _) in zip(started, ids, placements, strict=True)
            ],
            owner=True,
        )

    # -- the actors ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.hosts)

    def __iter__(self) -> Iterator[RemoteHost]:
        return iter(self.hosts)

    def __getitem__(self, index: int) -> RemoteHost:
        return self.hosts[index]

    def owner_of(self, handle: TensorHandle) -> RemoteHost:
        """The actor that holds ``handle``."""
        host = self._by_id.get(handle.owner)
        if host is None:
            raise ValidationError(
                f"tensor handle {handle.key} belongs to host actor {handle.owner}, which is not "
                "in this pool",
                argument="handle",
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
        shards: Sequence[Any],
        *,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        **attrs: Any,
    ) -> list[Any]:
        """Run ``op`` on every shard, shard ``i`` on actor ``i % len(pool)``, all at once.

        A shard is an array or a tuple of arrays (the op's tensor inputs), uploaded to its
        actor; the results are handles that stay there (``gather`` downloads them).
        """
        pending = []
        for i, shard in enumerate(shards):
            arrays = shard if isinstance(shard, tuple) else (shard,)
            pending.append(self.hosts[i % len(self.hosts)].submit("run_arrays", op, arrays, attrs))
        return wait(pending, timeout_s)

    def gather(
        self, handles: Sequence[TensorHandle], timeout_s: float | None = DEFAULT_TIMEOUT_S
    ) -> list[np.ndarray]:
        """Each handle's values, downloaded from its actor in parallel."""
        return wait([self.owner_of(h).submit("download", h) for h in handles], timeout_s)

    # -- collectives ---------------------------------------------------------------------------
    def init_collectives(
        self, binding: str = DEFAULT_BINDING, timeout_s: float | None = DEFAULT_TIMEOUT_S
    ) -> None:
        """One NCCL communicator over the pool's actors, actor ``i`` being rank ``i``: rank 0
        makes the unique id, Ray carries it to every actor, and all join at once."""
        unique_id = self.hosts[0].submit("collective_unique_id", binding).result(timeout_s)
        n = len(self.hosts)
        wait(
            [
                h.submit("collective_init", unique_id, n, rank, binding)
                for rank, h in enumerate(self.hosts)
            ],
            timeout_s,
        )

    def collective(
        self,
        name: str,
        handles: Sequence[TensorHandle],
        *,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        **kwargs: Any,
    ) -> list[TensorHandle]:
        """Collective ``name`` (``all_reduce``, ``all_gather``, ``broadcast``) over the pool,
        ``handles[i]`` held by rank ``i``; one result handle per rank."""
        if len(handles) != len(self.hosts):
            raise ValidationError(
                f"{name} takes one handle per rank ({len(self.hosts)}), got {len(handles)}",
                argument="handles",
            )
        return wait(
            [
                h.submit("collective", name, t, **kwargs)
                for h, t in zip(self.hosts, handles, strict=True)
            ],
            timeout_s,
        )

    # -- lifetime ------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Kill the pool's actors (their tensors go with them); a sub-pool kills none."""
        if self._closed:
            return
        self._closed = True
        if self._owner:
            ray = import_ray()
            for host in self.hosts:
                ray.kill(host.actor)

    def __enter__(self) -> HostPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


__all__ = ["DEFAULT_START_TIMEOUT_S", "HostPool"]
