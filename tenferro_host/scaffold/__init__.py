"""``tenferro-host new-op NAME``: write a ready-to-install operation package.

The package (``template/``: pyproject with the entry point, ``TENFERRO_HOST_API``, a DSL
kernel, a raw CUDA kernel with an nvcc fatbin build step and NVRTC fallback, a reference,
tolerances, tests using the kit and a CI script) passes its own tests on a machine without a
GPU. Template files end in ``.tmpl``; ``{{name}}``, ``{{dist}}``, ``{{op}}`` and ``{{env}}``
are replaced, and the directory ``__pkg__`` is renamed to the package name.

>>> import tempfile, pathlib
>>> root = scaffold("my_ops", pathlib.Path(tempfile.mkdtemp()))
>>> sorted(p.name for p in (root / "my_ops").iterdir())[:3]
['__init__.py', 'cpu.py', 'cuda_raw.py']
"""

from __future__ import annotations

import importlib.util
import keyword
import re
import sys
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from ..errors import ValidationError

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: The op every scaffold declares, inside the package's namespace.
OP = "square"


#: Longer names make paths (``NAME/NAME/plugin.py``, the wheel's name) past file-system limits.
MAX_NAME = 64


def _check_name(name: str) -> None:
    if not _NAME.match(name) or keyword.iskeyword(name):
        raise ValidationError(
            f"{name!r} is not a package name; use lowercase letters, digits and '_', starting "
            "with a letter (e.g. my_ops)",
            argument="name",
        )
    if len(name) > MAX_NAME:
        raise ValidationError(
            f"the package name is {len(name)} characters long; use at most {MAX_NAME}",
            argument="name",
        )
    if name in sys.stdlib_module_names or importlib.util.find_spec(name) is not None:
        raise ValidationError(
            f"{name!r} is taken by an installed module; a package of that name would shadow "
            "it once installed: pick another name (e.g. my_ops)",
            argument="name",
        )


def _render(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def _copy(src: Traversable, dst: Path, values: dict[str, str]) -> None:
    for entry in src.iterdir():
        name = entry.name.replace("__pkg__", values["name"])
        if entry.is_dir():
            (dst / name).mkdir()
            _copy(entry, dst / name, values)
        elif name.endswith(".tmpl"):
            (dst / name.removesuffix(".tmpl")).write_text(_render(entry.read_text(), values))


def scaffold(name: str, parent: Path) -> Path:
    """Write the package ``name`` into ``parent/name``; returns that directory."""
    _check_name(name)
    try:
        return _write(name, parent)
    except OSError as exc:
        raise ValidationError(
            f"cannot write the package {name!r} into {parent}: {exc.strerror or exc}; "
            "pick a writable --dir",
            argument="dir",
        ) from exc


def _write(name: str, parent: Path) -> Path:
    root = parent / name
    if root.exists():
        raise ValidationError(
            f"{root} already exists; pick another name or remove it", argument="name"
        )
    if not parent.is_dir():
        raise ValidationError(f"{parent} is not a directory; create it first", argument="dir")
    values = {
        "name": name,
        "dist": name.replace("_", "-"),
        "op": f"{name}.{OP}",
        "env": name.upper(),
    }
    root.mkdir()
    _copy(resources.files(__package__).joinpath("template"), root, values)
    (root / "ci.sh").chmod(0o755)
    return root


__all__ = ["MAX_NAME", "OP", "scaffold"]
