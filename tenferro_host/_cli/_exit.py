"""Exit codes of ``tenferro-host``, and telling an op's own failure (exit 3) from a usage error."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import TenferroError

if TYPE_CHECKING:
    from .._host import Host
    from ..provider._registry import OpRecord

SCHEMA_VERSION = 1
EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_ERROR = 2
EXIT_OP_RAISED = 3


class OpRaised(Exception):  # noqa: N818 - a wrapper signal, not an error kind of its own
    """An op's variant or reference (plugin code) raised something other than a typed error."""


def call_op_code(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call plugin code; anything but a TenferroError (SystemExit included) becomes OpRaised."""
    try:
        return fn(*args, **kwargs)
    except TenferroError:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a plugin's SystemExit must not end the CLI
        raise OpRaised(
            f"{what} raised {type(exc).__name__}: {exc}; this is a bug in the op's package"
        ) from exc


def find_op(host: Host, name: str) -> OpRecord:
    """The op ``name``. When it is missing because the plugin of its package (the name before
    the first dot, or a distribution name) failed to load or register, OpRaised: that is the
    package's bug (exit 3), not a mistyped name (exit 2)."""
    if name not in host.registry.ops:
        package = name.split(".", 1)[0].replace("-", "_")
        for r in host.plugins.records:
            if r.status == "error" and package in (r.name, r.dist.replace("-", "_")):
                raise OpRaised(
                    f"no op named {name!r}: the plugin of its package failed to load or "
                    f"register: {r.name!r} ({r.dist} {r.version}: {r.error}); this is a bug in "
                    "the op's package"
                )
    return host.registry.op(name)
