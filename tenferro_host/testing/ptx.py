"""Read the parameter list of every ``.entry`` in PTX text: no driver, no GPU.

The conformance suite checks each raw launch's argument sizes against these, so a launch whose
argument list does not match its kernel is caught on a machine without a GPU.

>>> ptx = '''
... .visible .entry scale(
...     .param .u64 scale_param_0,
...     .param .f32 scale_param_1,
...     .param .align 8 .b8 scale_param_2[16]
... )
... .visible .entry nothing()
... '''
>>> entries = parse_entries(ptx)
>>> [p.nbytes for p in entries["scale"]], entries["nothing"]
([8, 4, 16], ())
>>> entries["scale"][1]
PtxParam(name='scale_param_1', type='f32', nbytes=4)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ValidationError

_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(
    r"^\s*\.param\s+(?:\.align\s+\d+\s+)?\.([busf])(8|16|32|64)\s+(?:\.ptr\s+)?"
    r"(?:\.(?:global|const|shared|local)\s+)?(?:\.align\s+\d+\s+)?([\w$]+)(?:\[(\d+)\])?\s*$"
)


@dataclass(frozen=True)
class PtxParam:
    """One kernel parameter: its PTX name, type (``u64``, ``f32``, ``b8`` ...) and size."""

    name: str
    type: str
    nbytes: int


def parse_entries(ptx: str | bytes) -> dict[str, tuple[PtxParam, ...]]:
    """Every ``.entry`` kernel of ``ptx`` with its parameters in order."""
    text = ptx.decode(errors="replace") if isinstance(ptx, bytes) else ptx
    entries: dict[str, tuple[PtxParam, ...]] = {}
    for m in _ENTRY.finditer(text):
        name, body = m.group(1), m.group(2)
        params = []
        for raw in (p for p in body.split(",") if p.strip()):
            pm = _PARAM.match(raw)
            if pm is None:
                raise ValidationError(
                    f"cannot read parameter {raw.strip()!r} of PTX entry {name!r}",
                    argument="ptx",
                )
            kind, bits, pname, count = pm.groups()
            size = int(bits) // 8 * (int(count) if count else 1)
            params.append(PtxParam(pname, f"{kind}{bits}", size))
        entries[name] = tuple(params)
    return entries


__all__ = ["PtxParam", "parse_entries"]
