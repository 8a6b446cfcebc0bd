"""What one host actor offers, as data the pool places work by.

An actor's caps are the ``tenferro-host caps --json`` document of its process (the same
builder), narrowed to the runtime it owns: that runtime's device (arch, UUID), every available
backend kind, the ops with the variant each backend kind would run and why a variant cannot run,
the verified peer pairs when asked for, and the persistent kernel cache's statistics. The same
facts can also be Ray resources (:func:`node_resources`), so that Ray itself only places an actor
on a node that has, e.g., an sm_90 GPU.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .. import _cli
from .._host import Host, parse_backend_name
from ..provider import active_kernel_cache

#: Prefix of the custom Ray resources :func:`node_resources` declares.
RESOURCE_PREFIX = "tenferro"


def arch_resource(arch: str) -> str:
    """The custom Ray resource counting a node's GPUs of ``arch`` (``tenferro.arch.sm_90``)."""
    return f"{RESOURCE_PREFIX}.arch.{arch}"


@dataclass(frozen=True)
class ActorCaps:
    """One actor's capabilities: its runtime's device and what its host can run there."""

    #: The runtime the actor owns (``cuda:0``, ``cpu:0`` ...) and the Ray node it runs on.
    backend: str
    node_id: str
    #: The runtime's device as ``caps --json`` lists it (``arch`` and ``uuid`` on CUDA).
    device: dict[str, Any]
    #: Every backend kind available in the actor's process.
    backends: tuple[str, ...]
    #: op name -> {"variants": {backend kind: variant kind}, "unavailable": {variant: why}}.
    ops: dict[str, dict[str, Any]] = field(repr=False)
    #: ``caps --probe-p2p`` pairs (``verified | unsupported | failed``); empty unless probed.
    peer_pairs: tuple[dict[str, Any], ...] = ()
    #: The persistent kernel cache's statistics, None when the cache is off.
    kernel_cache: dict[str, Any] | None = None
    #: ``CUDA_VISIBLE_DEVICES`` of the actor's process: the GPU(s) Ray gave it.
    visible_devices: str | None = None

    @property
    def kind(self) -> str:
        """The backend kind of the actor's runtime."""
        return parse_backend_name(self.backend)[0]

    @property
    def arch(self) -> str | None:
        """``sm_XY`` of a CUDA device, None on other backends."""
        arch = self.device.get("arch")
        return str(arch) if arch is not None else None

    @property
    def uuid(self) -> str | None:
        """The device UUID of a CUDA device, None on other backends."""
        uuid = self.device.get("uuid")
        return str(uuid) if uuid is not None else None

    def can_run(self, op: str, kind: str | None = None) -> bool:
        """Whether ``op`` has a variant for backend ``kind`` (default: the actor's own) whose
        requirements are met here, e.g. a ``cuda-raw`` variant whose kernels were built for
        this device's arch."""
        kind = kind or self.kind
        entry = self.ops.get(op)
        if entry is None or kind not in self.backends:
            return False
        variant = entry["variants"].get(kind)
        return variant is not None and variant not in entry["unavailable"]


def actor_caps(host: Host, backend: str, node_id: str, *, probe_p2p: bool = False) -> ActorCaps:
    """The caps of an actor owning ``backend`` of ``host`` (the ``caps --json`` builder)."""
    report = _cli.caps_report(host)
    kind, index = parse_backend_name(backend)
    available = {b["kind"]: b for b in report["backends"] if b["available"]}
    devices = available[kind]["devices"] if kind in available else []
    cache = active_kernel_cache()
    return ActorCaps(
        backend=backend,
        node_id=node_id,
        device=dict(devices[index]) if index < len(devices) else {},
        backends=tuple(available),
        ops={
            op["name"]: {"variants": op["variants"], "unavailable": op["unavailable"]}
            for op in report["ops"]
            if op["status"] == "ok"
        },
        peer_pairs=tuple(_cli.p2p_report(host)[0]) if probe_p2p else (),
        kernel_cache=cache.stats() if cache is not None else None,
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
    )


def node_resources(host: Host) -> dict[str, float]:
    """Custom Ray resources for this node's GPUs by arch, for ``ray start --resources``.

    ``{"tenferro.arch.sm_90": 8.0}`` on a node of eight H100s; empty without CUDA. A pool started
    with ``arch="sm_90"`` asks for one of them per actor, so Ray places it only on such nodes.
    """
    status = host.backend_status("cuda")
    if not status.available:
        return {}
    counts = Counter(str(d["arch"]) for d in status.devices)
    return {arch_resource(arch): float(n) for arch, n in sorted(counts.items())}


__all__ = ["RESOURCE_PREFIX", "ActorCaps", "actor_caps", "arch_resource", "node_resources"]
