"""Front-end: a kernel's Python source, parsed once when ``@K.kernel`` (or ``@K.func``) decorates
a function, with its signature checked. Each specialization lowers it to typed IR
(:mod:`tenferro_host.kernel._lowering`, whose docstring states the typing rules).
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import DslError
from . import lang

_NO_DEFAULT = inspect.Parameter.empty


@dataclass(frozen=True)
class ParamDecl:
    """One declared parameter: its annotation (None: an unannotated device-function parameter,
    typed from its call site) and where it is written."""

    name: str
    annotation: lang.ArrayType | lang.ScalarType | lang.GenericType | lang.ConstType | None
    default: Any
    lineno: int
    col_offset: int

    @property
    def is_const(self) -> bool:
        return isinstance(self.annotation, lang.ConstType)


class ParsedKernel:
    """A kernel function's parsed source, checked signature and name-resolution namespace."""

    kind = "kernel"

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
            raise DslError(f"@K.{self.kind} decorates a function defined with def, not {fn!r}")
        code = fn.__code__
        self.name = fn.__name__
        self.filename = code.co_filename
        try:
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise DslError(
                f"the source of {self.kind} {fn.__name__!r} is not available: {self.kind} source "
                "must live in a file (not an interactive session, exec or eval); move it into a "
                "module",
                filename=self.filename,
                lineno=code.co_firstlineno,
                col_offset=0,
            ) from exc
        source = "".join(lines)
        self.line_offset = start - 1
        if lines and lines[0][:1] in (" ", "\t"):
            source = "if True:\n" + source  # keeps the original columns of an indented def
            self.line_offset -= 1
        tree = ast.parse(source, filename=self.filename)
        node = tree.body[0]
        if isinstance(node, ast.If):
            node = node.body[0]
        if not isinstance(node, ast.FunctionDef):
            raise self.error(node, f"@K.{self.kind} decorates a plain def function (not async)")
        self.func = node
        self._fn = fn
        self.params = self._check_signature(fn)

    def shared_size_args(self, runtime: Sequence[ParamDecl]) -> tuple[int, ...]:
        """Positions in ``runtime`` of the parameters a top-level ``K.shared(T, n)`` sizes at
        launch: their values select a launch's shared memory as its shape does (a superset:
        a statement spelled like one counts)."""
        names = [d.name for d in runtime]
        found: set[int] = set()
        for stmt in self.func.body:
            call = stmt.value if isinstance(stmt, ast.Assign) else None
            if (
                isinstance(call, ast.Call)
                and len(call.args) == 2
                and isinstance(call.args[1], ast.Name)
                and call.args[1].id in names
                and getattr(call.func, "attr", getattr(call.func, "id", None)) == "shared"
            ):
                found.add(names.index(call.args[1].id))
        return tuple(sorted(found))

    def namespace(self) -> Mapping[str, Any]:
        """The function's closure and globals as they are now: a specialization reads them
        when it is made (names defined after the ``def`` resolve too)."""
        return ChainMap(dict(inspect.getclosurevars(self._fn).nonlocals), self._fn.__globals__)

    def error(self, node: ast.AST, message: str) -> DslError:
        """A DslError located at ``node`` (absolute file line, column of the source)."""
        return DslError(
            message,
            filename=self.filename,
            lineno=getattr(node, "lineno", 1) + self.line_offset,
            col_offset=getattr(node, "col_offset", 0),
        )

    def _check_signature(self, fn: Callable[..., Any]) -> tuple[ParamDecl, ...]:
        args = self.func.args
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                raise self.error(extra, "kernels take named parameters only (no *args/**kwargs)")
        if args.posonlyargs or args.kwonlyargs:
            first = (args.posonlyargs or args.kwonlyargs)[0]
            raise self.error(first, "kernel parameters are plain: no '/' or '*' markers")
        if self.func.returns is not None and not (
            isinstance(self.func.returns, ast.Constant) and self.func.returns.value is None
        ):
            raise self.error(self.func.returns, "a kernel returns nothing: write '-> None' or omit")
        try:
            annotations = inspect.get_annotations(fn, eval_str=True)
        except Exception as exc:  # an annotation that does not evaluate: locate which
            where: ast.AST = self.func
            for arg in args.args:
                if arg.annotation is not None:
                    try:
                        eval(ast.unparse(arg.annotation), fn.__globals__)  # noqa: S307
                    except Exception:
                        where = arg.annotation
                        break
            message = exc.args[0] if isinstance(exc, DslError) else str(exc)
            raise self.error(where, f"a kernel annotation does not evaluate: {message}") from exc
        signature = inspect.signature(fn)
        decls = []
        for arg in args.args:
            ann = annotations.get(arg.arg, _NO_DEFAULT)
            if not isinstance(
                ann, (lang.ArrayType, lang.ScalarType, lang.GenericType, lang.ConstType)
            ):
                raise self.error(
                    arg,
                    f"parameter {arg.arg!r} needs a kernel annotation: K.Array[T], a scalar type "
                    "(K.F, K.I, K.f32, K.u32, ...) or K.Const[int|float|bool]",
                )
            default = signature.parameters[arg.arg].default
            if default is not _NO_DEFAULT and not isinstance(ann, lang.ConstType):
                raise self.error(arg, f"only K.Const parameters may have a default ({arg.arg!r})")
            decls.append(
                ParamDecl(arg.arg, ann, default, arg.lineno + self.line_offset, arg.col_offset)
            )
        return tuple(decls)


class ParsedFunction(ParsedKernel):
    """A ``@K.func`` device function: parameters are optionally annotated (``K.Array[T]``, a
    scalar type, ``K.F``/``K.I``; unannotated ones take their call site's type) and it may
    ``return`` a value. It is inlined into each kernel that calls it."""

    kind = "func"

    def _check_signature(self, fn: Callable[..., Any]) -> tuple[ParamDecl, ...]:
        args = self.func.args
        if args.vararg or args.kwarg or args.posonlyargs or args.kwonlyargs or args.defaults:
            raise self.error(
                self.func,
                "device functions take plain positional parameters "
                "(no defaults, *args, **kwargs, '/' or '*')",
            )
        try:
            annotations = inspect.get_annotations(fn, eval_str=True)
        except Exception as exc:
            raise self.error(
                self.func, f"an annotation of {self.name!r} does not evaluate: {exc}"
            ) from exc
        decls = []
        for arg in args.args:
            ann = annotations.get(arg.arg)
            if ann is not None and not isinstance(
                ann, (lang.ArrayType, lang.ScalarType, lang.GenericType)
            ):
                raise self.error(
                    arg,
                    f"parameter {arg.arg!r} of device function {self.name!r}: "
                    "annotate with K.Array[T], a scalar type (K.F, K.f32 ...) "
                    "or nothing (typed from the call site)",
                )
            decls.append(
                ParamDecl(arg.arg, ann, _NO_DEFAULT, arg.lineno + self.line_offset, arg.col_offset)
            )
        return tuple(decls)


class DeviceFunction:
    """What ``@K.func`` returns: a helper that kernels and other device functions call; Python
    never runs its body."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.parsed = ParsedFunction(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise DslError(
            f"device function {self.parsed.name!r} runs only inside kernels; call it "
            "from a @K.kernel body"
        )

    def __repr__(self) -> str:
        return f"<K.func {self.parsed.name} ({self.parsed.filename}:{self.parsed.func.lineno})>"


# ---------------------------------------------------------------- lowering
