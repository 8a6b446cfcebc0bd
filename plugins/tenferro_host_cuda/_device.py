"""CUDA device discovery: what ``caps`` shows and what the launch checks compare against."""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass
from typing import Any

from tenferro_host import BackendStatus, CudaDeviceId, CudaDeviceUuid, UnsupportedError

from ._driver import check, drv


@dataclass(frozen=True)
class CudaDeviceInfo:
    """Identity, limits, versions and placement (PCI bus id, closest host NUMA node) of one
    CUDA device (limits used by the launch checks)."""

    ordinal: CudaDeviceId
    uuid: CudaDeviceUuid
    name: str
    compute_capability: tuple[int, int]
    total_memory: int
    multiprocessors: int
    warp_size: int
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    max_shared_memory_per_block: int
    max_shared_memory_per_block_optin: int
    memory_pools_supported: bool
    driver_version: tuple[int, int]
    nvrtc_version: tuple[int, int] | None
    pci_bus_id: str
    host_numa_id: int | None

    @property
    def arch(self) -> str:
        """``sm_XY`` of this device (what NVRTC compiles CUBIN for by default)."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def as_dict(self) -> dict[str, Any]:
        """Plain values for ``caps --json``."""
        out = asdict(self)
        out["ordinal"] = self.ordinal.ordinal
        out["uuid"] = str(self.uuid)
        out["arch"] = self.arch
        return out


def nvrtc_version() -> tuple[int, int] | None:
    """NVRTC's (major, minor), or None when NVRTC is not installed."""
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
    except Exception:
        return None
    return (major, minor) if int(err) == 0 else None


def driver_version(driver: Any = None) -> tuple[int, int]:
    """The CUDA driver's version as (major, minor) (``driver``: the binding; default ``drv()``)."""
    v = check((drv() if driver is None else driver).cuDriverGetVersion(), "cuDriverGetVersion")
    return (v // 1000, (v % 1000) // 10)


def query(ordinal: int, driver: Any = None) -> CudaDeviceInfo:
    """Device info for a process-visible ordinal, asked of ``driver`` (default: ``drv()``, which
    initialises the driver)."""
    d = drv() if driver is None else driver
    dev = check(d.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
    A = d.CUdevice_attribute  # noqa: N806 - the driver's enum class

    def attr(name: str) -> int:
        return int(check(d.cuDeviceGetAttribute(getattr(A, name), dev), name))

    raw_name = check(d.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = bytes(raw_name).split(b"\0", 1)[0].decode(errors="replace")
    uuid = check(d.cuDeviceGetUuid(dev), "cuDeviceGetUuid")
    return CudaDeviceInfo(
        ordinal=CudaDeviceId(ordinal),
        uuid=CudaDeviceUuid(bytes(uuid.bytes)),
        name=name,
        compute_capability=(
            attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
            attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
        ),
        total_memory=int(check(d.cuDeviceTotalMem(dev), "cuDeviceTotalMem")),
        multiprocessors=attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        warp_size=attr("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
        max_threads_per_block=attr("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
        max_block_dims=(
            attr("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X"),
            attr("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y"),
            attr("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z"),
        ),
        max_grid_dims=(
            attr("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X"),
            attr("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y"),
            attr("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z"),
        ),
        max_shared_memory_per_block=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
        max_shared_memory_per_block_optin=attr(
            "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"
        ),
        memory_pools_supported=bool(attr("CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED")),
        driver_version=driver_version(d),
        nvrtc_version=nvrtc_version(),
        **placement(dev, d),
    )


def placement(dev: Any, driver: Any = None) -> dict[str, Any]:
    """Where the device sits: its PCI bus id (``domain:bus:device.function``) and the host NUMA
    node closest to it (None where the system has no NUMA or the driver does not say).

    Per-pair link facts (access, performance rank, native atomics) are in
    :func:`tenferro_host_cuda._peer.link_attributes`.
    """
    d = drv() if driver is None else driver
    raw_bus = check(d.cuDeviceGetPCIBusId(16, dev), "cuDeviceGetPCIBusId")
    numa = d.cuDeviceGetAttribute(d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev)
    numa_id = int(numa[1]) if int(numa[0]) == 0 and int(numa[1]) >= 0 else None
    return {
        "pci_bus_id": bytes(raw_bus).split(b"\0", 1)[0].decode(errors="replace"),
        "host_numa_id": numa_id,
    }


def probe() -> BackendStatus:
    """Whether CUDA runs here; never raises (a missing driver or library is a reason)."""
    try:  # found, not imported: without a driver, drv() answers before importing it
        found = importlib.util.find_spec("cuda.bindings.driver") is not None
    except (ImportError, ValueError) as exc:
        found, why = False, str(exc)
    else:
        why = "No module named 'cuda.bindings'"
    if not found:
        return BackendStatus(
            "cuda",
            False,
            reason=f"cuda-python is not installed ({why}); pip install 'tenferro-host[cuda]'",
        )
    try:
        d = drv()
        count = int(check(d.cuDeviceGetCount(), "cuDeviceGetCount"))
    except UnsupportedError as exc:
        return BackendStatus("cuda", False, reason=exc.reason, error=exc)
    except Exception as exc:
        return BackendStatus(
            "cuda",
            False,
            reason=f"the CUDA driver is not usable here: {type(exc).__name__}: {exc}",
        )
    if count == 0:
        return BackendStatus("cuda", False, reason="the CUDA driver sees no device")
    try:
        devices = [query(i).as_dict() | {"index": i} for i in range(count)]
    except Exception as exc:
        return BackendStatus(
            "cuda", False, reason=f"querying CUDA devices failed: {type(exc).__name__}: {exc}"
        )
    unsupported = [dev["name"] for dev in devices if not dev["memory_pools_supported"]]
    if unsupported:
        return BackendStatus(
            "cuda",
            False,
            devices=devices,
            reason=f"devices without stream-ordered memory pools: {', '.join(unsupported)}",
        )
    return BackendStatus("cuda", True, devices=devices)


__all__ = ["CudaDeviceInfo", "driver_version", "nvrtc_version", "placement", "probe", "query"]
