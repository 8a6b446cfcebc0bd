"""Exit codes of ``tenferro-host`` and the wrapper that tells an op's own failure apart."""

from __future__ import annotations

from typing import Any

from ..errors import TenferroError

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
