"""The tests' and benches' local Ray cluster: every process of it on 127.0.0.1, none left behind.

On Linux a local ``ray.init()`` binds its GCS, raylet and workers to the machine's routable
address. Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` once, when ``ray`` is first imported
(its processes inherit it), and then keeps a single-node cluster on loopback: this module sets it
before importing Ray, and :func:`start_local_cluster` refuses to start if Ray was imported
without it. :func:`listening_sockets` says where the cluster's processes listen, for the test
that holds the rule.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import time
from pathlib import Path

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# isort: split
import ray  # after the environment it reads at import
from ray._private import ray_constants

#: Where a test cluster may listen.
LOOPBACK = ("127.0.0.1", "::1")


def ray_children() -> set[int]:
    """The live processes this one started that are Ray's (GCS, raylet, monitors)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"ray" in command:
            found.add(int(stat.parent.name))
    return found


def _descendants(roots: set[int]) -> set[int]:
    """``roots`` and every live process below them (Ray's workers are the raylet's children)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found = set(roots)
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found} - found
        found |= below
        grew = bool(below)
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    return inodes


def _address(hex_address: str) -> str:
    """An address of /proc/net/tcp{,6} (little-endian 32-bit words) as text; an IPv4 address
    mapped into IPv6 (``::ffff:127.0.0.1``) as the IPv4 one."""
    raw = bytes.fromhex(hex_address)
    address = ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4)))
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


def listening_sockets(pids: set[int]) -> list[tuple[str, int, int]]:
    """``(address, port, pid)`` of every TCP socket in LISTEN state held by ``pids`` or their
    descendants."""
    owner = {inode: pid for pid in _descendants(pids) for inode in _socket_inodes(pid)}
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in owner:  # 0A: LISTEN
                    address, port = fields[1].split(":")
                    found.append((_address(address), int(port, 16), owner[fields[9]]))
    return found


def start_local_cluster(num_cpus: int = 2, num_gpus: int = 2) -> float:
    """Start a local Ray cluster on loopback (``num_gpus`` logical GPUs, no dashboard, no usage
    report); the seconds it took. Ray gives a starting node 30 s to register, which a machine
    under heavy load can miss once: then the processes of that start are ended and it tries
    once more."""
    if ray_constants.ENABLE_RAY_CLUSTER:
        raise RuntimeError(
            "ray was imported before tests/support/ray_cluster.py set "
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, so its cluster would listen on the machine's "
            "routable address: import this module before anything imports ray"
        )
    options = {
        "num_cpus": num_cpus,
        "num_gpus": num_gpus,
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": "ERROR",
        "object_store_memory": 100 << 20,
    }
    t0 = time.perf_counter()
    try:
        ray.init(**options)
    except Exception as exc:
        if "timed out during startup" not in str(exc):
            raise
        ray.shutdown()  # knows nothing of a node that never registered: end what it started
        for pid in ray_children():
            with contextlib.suppress(ProcessLookupError, ChildProcessError):  # gone already
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        ray.init(**options)
    return time.perf_counter() - t0


__all__ = ["LOOPBACK", "listening_sockets", "ray_children", "start_local_cluster"]
