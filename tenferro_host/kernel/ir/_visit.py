"""Walking the IR with dispatch: :class:`Visitor` and the source emitters' base."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Generic, TypeVar

from ._catalog import NODES
from ._node_base import Expr, Node, Stmt
from ._nodes import Break, Continue, If, KernelIR, Return, While


def dispatch_table(
    owner: type, prefix: str, nodes: Iterable[type[Node]] = NODES
) -> dict[type[Node], Callable[..., Any]]:
    """``{node class: owner.<prefix><NodeName>}`` for each of ``nodes``; a TypeError naming
    every node class ``owner`` has no method for."""
    nodes = tuple(nodes)
    missing = [n.__name__ for n in nodes if not callable(getattr(owner, prefix + n.__name__, None))]
    if missing:
        raise TypeError(
            f"{owner.__qualname__} handles no IR node {', '.join(missing)}: define "
            + ", ".join(prefix + name for name in missing)
        )
    return {n: getattr(owner, prefix + n.__name__) for n in nodes}


R = TypeVar("R")


class Visitor(Generic[R]):
    """Base of a walk over the IR (the interpreter, each emitter): one ``visit_<Node>`` method
    per class of :data:`NODES`, looked up in a table built once per subclass (pass
    ``abstract=True`` for a base that other visitors complete). :meth:`stmt` and :meth:`expr`
    dispatch a node with the walk's extra arguments; an expression's handler returns ``R``."""

    PREFIX: ClassVar[str] = "visit_"
    _handlers: ClassVar[dict[type[Node], Callable[..., Any]]] = {}

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not abstract:
            cls._handlers = dispatch_table(cls, cls.PREFIX)

    def _unknown(self, node: Node) -> TypeError:
        kind = "statement" if isinstance(node, Stmt) else "expression"
        return TypeError(
            f"{type(self).__qualname__}: unknown IR {kind} {type(node).__name__}: {node!r}"
        )

    def stmt(self, s: Stmt, *args: Any) -> None:
        """Run the handler of statement ``s``'s node class (one dict lookup)."""
        try:
            handler = self._handlers[type(s)]
        except KeyError:
            raise self._unknown(s) from None
        handler(self, s, *args)

    def expr(self, e: Expr, *args: Any) -> R:
        """The value of expression ``e``'s handler (one dict lookup)."""
        try:
            handler = self._handlers[type(e)]
        except KeyError:
            raise self._unknown(e) from None
        result: R = handler(self, e, *args)
        return result


class SourceEmitter(Visitor[str], abstract=True):
    """What every source emitter (CUDA C, WGSL) shares: output lines at an indentation depth,
    each with its DSL origin; helper definitions by name, each kept once; numbered temporaries.
    A target defines ``visit_<Node>`` for every node class; expression handlers return source
    text, statement handlers append lines with :meth:`line`.

    ``lines[i]`` came from the statement at ``origins[i]`` (``(line, file)``: ``file`` empty
    when the line is the kernel's own file, ``(0, "")`` outside any statement). The body of the
    generated function starts at ``depth``; :meth:`block` indents one more level.
    """

    INDENT: ClassVar[str] = "    "
    FIRST_TEMP: ClassVar[int] = 0
    """The number of the first temporary :meth:`temp` hands out."""

    def __init__(self, kernel: KernelIR, depth: int = 1) -> None:
        self.kernel = kernel
        self.depth = depth
        self.lines: list[str] = []
        self.origins: list[tuple[int, str]] = []
        self.origin: tuple[int, str] = (0, "")
        self.helpers: dict[str, str] = {}
        self.temps = self.FIRST_TEMP

    # -------------------------------------------------------- output

    def line(self, text: str) -> None:
        """Append ``text`` at the current depth."""
        self.lines.append(self.INDENT * self.depth + text)
        self.origins.append(self.origin)

    def raw(self, text: str) -> None:
        """Append ``text`` unindented (a preprocessor directive)."""
        self.lines.append(text)
        self.origins.append(self.origin)

    @contextmanager
    def indented(self) -> Iterator[None]:
        """Lines emitted inside the block are indented one level more."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    @contextmanager
    def braced(self) -> Iterator[None]:
        """A ``{ ... }`` block: the lines emitted inside it one level deeper."""
        self.line("{")
        with self.indented():
            yield
        self.line("}")

    def helper(self, name: str, source: str) -> None:
        """Define helper ``name`` once (the first definition wins)."""
        self.helpers.setdefault(name, source)

    def temp(self) -> int:
        """A fresh number for the temporaries of one construct."""
        n = self.temps
        self.temps += 1
        return n

    # -------------------------------------------------------- statements

    def statements(self, stmts: Iterable[Stmt]) -> None:
        """``stmts`` at the current depth."""
        for s in stmts:
            self.stmt(s)

    def block(self, stmts: Iterable[Stmt]) -> None:
        """``stmts`` one level deeper."""
        with self.indented():
            self.statements(stmts)

    def stmt(self, s: Stmt, *args: Any) -> None:
        """Emit ``s``, its lines tagged with its source line and file."""
        outer, self.origin = self.origin, (s.line, s.file)
        try:
            super().stmt(s, *args)
        finally:
            self.origin = outer

    # -------------------------------------------------------- control flow
    # It reads the same in C and WGSL (braces, ``break;``): one definition for both targets.
    def visit_If(self, s: If) -> None:
        """``if (cond) { then } else { orelse }``."""
        self.line(f"if ({self.expr(s.cond)}) {{")
        self.block(s.then)
        if s.orelse:
            self.line("} else {")
            self.block(s.orelse)
        self.line("}")

    def visit_While(self, s: While) -> None:
        """``while (cond) { body }``."""
        self.line(f"while ({self.expr(s.cond)}) {{")
        self.block(s.body)
        self.line("}")

    def visit_Break(self, s: Break) -> None:
        """``break;``."""
        self.line("break;")

    def visit_Continue(self, s: Continue) -> None:
        """``continue;``."""
        self.line("continue;")

    def visit_Return(self, s: Return) -> None:
        """``return;``."""
        self.line("return;")
