"""Operation specifications: what an operation package declares through the registry.

>>> import numpy as np
>>> spec = OpSpec(
...     name="my_pkg.scale",
...     signature=Signature(inputs=("x",), attributes={"factor": float}),
...     reference=lambda x, factor=1.0: x * factor,
...     variants={"cpu": lambda ex, x, factor=1.0: ex.runtime.upload(x.download() * factor)},
... )
>>> spec.package
'my_pkg'
>>> spec.tolerance("float32"), spec.tolerance("int32")
((1e-05, 1e-06), (0.0, 0.0))
>>> OpSpec(name="my_pkg.colsum", signature=Signature(inputs=("x",)), reference=np.sum,
...        variants={}, rtol={"float32": 1e-4}).tolerance("float32")
(0.0001, 1e-06)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _shapes
from ._rules import Rule, bind
from ._shapes import ShapeDecl
from .errors import RuleError, UnsupportedError, ValidationError

#: Variant kinds an op may declare; ``dsl`` expands to every backend with JIT_KERNEL.
VARIANT_KINDS = ("cpu", "cuda-raw", "dsl")
#: The native variant kind of each backend kind, preferred over ``dsl``.
NATIVE_VARIANT = {"cpu": "cpu", "cuda": "cuda-raw"}
#: Default (rtol, atol) per dtype when an op declares none; integers and bools compare exactly.
DEFAULT_TOLERANCES: Mapping[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-3),
    "float32": (1e-5, 1e-6),
    "float64": (1e-12, 1e-12),
    "complex64": (1e-5, 1e-6),
    "complex128": (1e-12, 1e-12),
}
_NAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+$")


@dataclass(frozen=True)
class Signature:
    """Inputs, outputs, scalar attributes, and the dtype and shape rules of an op.

    ``dtypes`` lists the input dtypes the op accepts (the CLI draws random inputs from it);
    ``dtype_rule``/``shape_rule`` are ``"same"`` (every input and output alike) or callables
    that take the input dtypes/shapes positionally and return the output dtype/shape (a tuple
    of them when there are several outputs). A rule gets, by keyword, the attributes it names
    among its parameters (every one with ``**kwargs``), none otherwise (:mod:`._rules`); a
    parameter without a default that is neither an input's slot nor an attribute is refused
    here.

    ``shapes`` declares each input's dimensions by symbols the inputs share (``{"a": ("m",
    "k"), "b": ("k", "n")}``; a size such as ``3`` is fixed, ``"*batch"`` is any number of
    dimensions), or is a callable of the attributes it names (by keyword) returning that
    mapping (None where it cannot say); ``samples`` are symbol sizes ``run`` uses by default
    (``{"m": 64, "k": 32, "n": 16}``); ``sample_attributes`` are the attribute values the kit
    passes when the caller gives none. The conformance suite and ``run`` draw shapes from the
    declaration; an op that declares none gets every input of one shape (1-D by default).
    """

    inputs: tuple[str, ...]
    outputs: tuple[str, ...] = ("out",)
    attributes: Mapping[str, type] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("float32",)
    dtype_rule: str | Callable[..., Any] = "same"
    shape_rule: str | Callable[..., Any] = "same"
    shapes: ShapeDecl | Callable[..., ShapeDecl | None] | None = None
    samples: tuple[Mapping[str, Any], ...] = ()
    sample_attributes: Mapping[str, Any] = field(default_factory=dict)
    #: the callable rules as the host calls them, bound once (:func:`._rules.bind`)
    _rules: Mapping[str, Rule] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rules = {
            kind: bind(kind, rule, self.inputs, self.attributes)
            for kind, rule in (("dtype_rule", self.dtype_rule), ("shape_rule", self.shape_rule))
            if not (isinstance(rule, str) and rule == "same")
        }
        if callable(self.shapes) and not isinstance(self.shapes, Mapping):
            rules["shapes"] = bind("shapes", self.shapes, (), self.attributes)
        object.__setattr__(self, "_rules", rules)

    def rule(self, kind: str) -> Rule | None:
        """The callable ``dtype_rule``, ``shape_rule`` or ``shapes`` as the host calls it
        (``rule(op, values, attributes)``); None for ``"same"`` or a declaration."""
        return self._rules.get(kind)

    def attributes_or_samples(self, attributes: Mapping[str, Any] | None) -> dict[str, Any]:
        """``attributes`` when the caller gives any, else ``sample_attributes``."""
        return dict(attributes) if attributes else dict(self.sample_attributes)

    def declared_shapes(self, attributes: Mapping[str, Any] | None = None) -> ShapeDecl | None:
        """The input dimensions declared for a call with ``attributes``, or None."""
        shapes = self._rules.get("shapes")
        if shapes is not None:
            return shapes(None, (), self.attributes_or_samples(attributes))
        return self.shapes if isinstance(self.shapes, Mapping) else None

    def input_shapes(
        self,
        shape: tuple[int, ...] | None = None,
        attributes: Mapping[str, Any] | None = None,
        elements: int = 1_000_000,
    ) -> list[tuple[int, ...]]:
        """One shape per input for a sample call (what ``run`` uses).

        Undeclared: every input has ``shape`` (default ``(elements,)``). Declared: ``shape``
        is the first input's shape, the other inputs follow the symbols it binds and take a
        symbol it leaves free from ``shape`` at the same position; without ``shape``, the
        first of ``samples``, else every symbol at one size giving about ``elements``.

        >>> sig = Signature(inputs=("a", "b"), shapes={"a": ("m", "k"), "b": ("k", "n")})
        >>> sig.input_shapes((3, 4)), sig.input_shapes(elements=100)
        ([(3, 4), (4, 4)], [(10, 10), (10, 10)])
        """
        decl = self.declared_shapes(attributes)
        if decl is None:
            return [shape or (elements,)] * len(self.inputs)
        if shape is None:
            binding = dict(self.samples[0]) if self.samples else None
            binding = binding or _shapes.default_binding(decl, self.inputs, elements)
            return _shapes.instantiate(decl, self.inputs, binding)
        first = self.inputs[0]
        bound = _shapes.bind(decl, (first,), [tuple(shape)])
        if bound is None:
            raise ValidationError(
                f"shape {tuple(shape)} does not fit input {first!r}, declared as "
                f"{decl[first]}; give one size per dimension",
                argument="shape",
            )
        _, variadic = _shapes.symbols(decl)
        for dims in decl.values():
            for pos, d in enumerate(dims):
                if isinstance(d, str) and d.lstrip("*") not in bound:
                    free = d.lstrip("*")
                    bound[free] = () if free in variadic else shape[min(pos, len(shape) - 1)]
        return _shapes.instantiate(decl, self.inputs, bound)


@dataclass(frozen=True, eq=False)
class KernelSource:
    """A kernel an op ships, for compile-only checks: ``language`` is "cuda" or "dsl".

    ``build_info`` records what the package's build step produced (e.g. a fatbin and its
    ``gencode`` targets) or why it did not; ``ops`` and ``caps`` show it.
    """

    name: str
    language: str
    source: Any
    archs: tuple[str, ...] = ()
    build_info: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for people: what was prebuilt, else how the kernel is compiled."""
        built = self.build_info.get("gencode") if self.build_info.get("fatbin") else None
        if built:
            codes = ", ".join(g.rpartition("code=")[2] for g in built)
            return f"{self.name} ({self.language}): prebuilt {codes}"
        reason = self.build_info.get("reason")
        tail = f" ({reason})" if reason else ""
        return f"{self.name} ({self.language}): compiled at run time{tail}"


Tolerance = float | Mapping[str, float] | None


@dataclass(frozen=True)
class Requirement:
    """What one variant needs beyond the host (an optional library, a driver feature).

    ``feature`` names it (the ``feature`` of the host's ``UnsupportedError``); ``unmet`` is a
    zero-argument callable, called lazily by ``caps``/``ops`` and before a run, that returns
    None when the variant can run, else the reason it cannot (how to fix it). It must not
    import the optional library at plugin load: use ``importlib.util.find_spec`` or a cached
    import inside the callable.
    """

    feature: str
    unmet: Callable[[], str | None]


@dataclass(frozen=True)
class OpSpec:
    """One operation: name (``package.op``), signature, numpy reference and variants.

    ``rtol``/``atol`` declare how close a variant must come to the reference: one number for
    every dtype, or a mapping from dtype name to number; dtypes left out keep
    :data:`DEFAULT_TOLERANCES`. A reduction declares ``reduction_length`` too: rounding errors
    of a sum of n terms in another order grow like sqrt(n), and so do its tolerances.

    ``backward`` makes the op differentiable through the torch and JAX bridges (reverse mode):
    ``backward(ops, inputs, outputs, grads, **attributes)`` returns one gradient per input
    (None for an input that has none), where ``ops(name)`` is the framework's exported op
    ``name``, ``inputs``/``outputs`` are the call's framework arrays (torch tensors, JAX
    arrays), ``grads`` one cotangent per output, and ``attributes`` the call's own. The
    gradients follow JAX's convention, the transpose of the op's linearization without
    conjugation (for real dtypes, the plain gradient); the torch bridge conjugates complex
    cotangents in and gradients out for torch's. Without it, a gradient through the op
    raises ``UnsupportedError`` naming the op.

    >>> def add_backward(ops, inputs, outputs, grads):
    ...     return grads[0], grads[0]
    >>> spec = OpSpec(name="p.add", signature=Signature(inputs=("a", "b")),
    ...               reference=lambda a, b: a + b, variants={}, backward=add_backward)
    >>> spec.backward is add_backward
    True
    """

    name: str
    signature: Signature
    reference: Callable[..., Any]
    variants: Mapping[str, Callable[..., Any]]
    kernels: tuple[KernelSource, ...] = ()
    doc: str = ""
    rtol: Tolerance = None
    atol: Tolerance = None
    #: The number of terms each output element sums, for ops that reduce: their tolerances grow
    #: with its square root. A rule like ``shape_rule``: the input shapes positionally, the
    #: attributes it names by keyword.
    reduction_length: Callable[..., int] | None = None
    #: variant kind -> :class:`Requirement`; a variant whose requirement is unmet is listed
    #: under ``unavailable`` by ``caps``/``ops`` and refused by the host before it runs.
    variant_requirements: Mapping[str, Requirement] = field(default_factory=dict)
    #: ``backward(ops, inputs, outputs, grads, **attributes)`` -> one gradient per input (None
    #: for none), in terms of other ops (``ops(name)``); None: the op is not differentiable.
    backward: Callable[..., Sequence[Any]] | None = None
    _reduction: Rule | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValidationError(
                f"op name {self.name!r} must be namespaced by its package, e.g. 'my_pkg.add'",
                argument="name",
            )
        if not isinstance(self.signature, Signature):
            raise ValidationError(
                f"op {self.name!r} needs signature=Signature(inputs=(...)), got "
                f"{type(self.signature).__name__}",
                argument="signature",
            )
        if not isinstance(self.variants, Mapping) or not all(
            callable(v) for v in self.variants.values()
        ):
            raise ValidationError(
                f"op {self.name!r}: variants must map variant kinds to callables "
                "(e.g. {'cpu': my_cpu_variant})",
                argument="variants",
            )
        unknown = set(self.variants) - set(VARIANT_KINDS)
        if unknown:
            raise ValidationError(
                f"op {self.name!r} declares unknown variant kinds {sorted(unknown)}; "
                f"use {', '.join(VARIANT_KINDS)}",
                argument="variants",
            )
        if not callable(self.reference):
            raise ValidationError(
                f"op {self.name!r} needs a callable reference", argument="reference"
            )
        for argument in ("rtol", "atol"):
            _check_tolerance(self.name, argument, getattr(self, argument))
        sig, length = self.signature, self.reduction_length
        reduction = None
        if length is not None:
            reduction = bind("reduction_length", length, sig.inputs, sig.attributes, self.name)
        object.__setattr__(self, "_reduction", reduction)
        _check_shapes(self.name, self.signature)
        requirements = self.variant_requirements
        if not isinstance(requirements, Mapping) or not all(
            isinstance(r, Requirement) and callable(r.unmet) for r in requirements.values()
        ):
            raise ValidationError(
                f"op {self.name!r}: variant_requirements must map variant kinds to "
                "Requirement(feature=..., unmet=callable)",
                argument="variant_requirements",
            )
        stray = set(requirements) - set(self.variants)
        if stray:
            raise ValidationError(
                f"op {self.name!r}: variant_requirements names {sorted(stray)}, which are not "
                f"its variants ({', '.join(self.variants)})",
                argument="variant_requirements",
            )
        if self.backward is not None and not callable(self.backward):
            raise ValidationError(
                f"op {self.name!r}: backward must be a callable "
                "backward(ops, inputs, outputs, grads, **attributes) returning one gradient per "
                f"input, or None; got {type(self.backward).__name__}",
                argument="backward",
                op=self.name,
            )

    @property
    def package(self) -> str:
        """The package part of the op's name (before the first dot)."""
        return self.name.split(".", 1)[0]

    def tolerance(
        self,
        dtype_name: str,
        shapes: Sequence[tuple[int, ...]] | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> tuple[float, float]:
        """(rtol, atol) for outputs of ``dtype_name`` from inputs of ``shapes``: declared (else
        the default), times sqrt(reduction length) when the op declares one.

        >>> spec = OpSpec(name="p.dot", signature=Signature(inputs=("a", "b")),
        ...               reference=lambda a, b: a @ b, variants={}, rtol=1e-5, atol=1e-6,
        ...               reduction_length=lambda a, b: a[-1])
        >>> [round(t, 9) for t in spec.tolerance("float32", [(8, 100), (100, 8)])]
        [0.0001, 1e-05]
        """
        d_rtol, d_atol = DEFAULT_TOLERANCES.get(dtype_name, (0.0, 0.0))
        rtol, atol = _pick(self.rtol, dtype_name, d_rtol), _pick(self.atol, dtype_name, d_atol)
        if self._reduction is None or shapes is None:
            return rtol, atol
        scale = math.sqrt(max(1, int(self._reduction(self.name, shapes, attributes))))
        return rtol * scale, atol * scale

    def unavailable_reason(self, kind: str) -> str | None:
        """None when variant ``kind`` can run, else why not (its requirement's reason).

        A requirement that raises is reported as the reason, naming the op, so ``caps`` and
        ``ops`` still work when a package's check is broken.
        """
        requirement = self.variant_requirements.get(kind)
        if requirement is None:
            return None
        try:
            reason = requirement.unmet()
        except Exception as exc:
            return (
                f"the {kind!r} requirement check of op {self.name!r} (package "
                f"{self.package!r}) raised {type(exc).__name__}: {exc}"
            )
        return None if reason is None else str(reason)

    def unavailable(self) -> dict[str, str]:
        """Variant kind -> reason, for every variant whose requirement is unmet."""
        out = {}
        for kind in self.variant_requirements:
            reason = self.unavailable_reason(kind)
            if reason is not None:
                out[kind] = reason
        return out

    def variant_kind_for(self, backend_kind: str, has_jit: bool) -> str | None:
        """The variant kind that runs on ``backend_kind``: native first, then ``dsl``."""
        native = NATIVE_VARIANT.get(backend_kind)
        if native in self.variants:
            return native
        if has_jit and "dsl" in self.variants:
            return "dsl"
        return None

    def unknown_attributes_error(self, names: Iterable[str]) -> ValidationError:
        """The error of a call that passes attributes ``names`` the op does not declare."""
        unknown = sorted(names)
        return ValidationError(
            f"op {self.name!r} has no attributes {unknown}; "
            f"it takes {sorted(self.signature.attributes) or 'none'}",
            argument=unknown[0],
            op=self.name,
        )

    def no_variant_error(self, backend: str, hint: str = "") -> UnsupportedError:
        """The error of a call on runtime ``backend`` that none of the op's variants runs on
        (``hint``, what to do instead, ends the message)."""
        return UnsupportedError(
            f"op {self.name!r} has no variant for backend {backend!r} "
            f"(it has {', '.join(self.variants)}){hint}",
            backend=backend,
            feature="variant",
            op=self.name,
        )


def _pick(declared: Tolerance, dtype_name: str, default: float) -> float:
    if declared is None:
        return default
    if isinstance(declared, Mapping):
        return float(declared.get(dtype_name, default))
    return float(declared)


def _check_shapes(op: str, sig: Signature) -> None:
    """The shape declaration names every input with valid dimensions; samples size every
    symbol; sample attributes are declared attributes. ValidationError naming the op."""
    stray = set(sig.sample_attributes) - set(sig.attributes)
    if stray:
        raise ValidationError(
            f"op {op!r}: sample_attributes names {sorted(stray)}, which are not its attributes",
            argument="sample_attributes",
            op=op,
        )
    if sig.shapes is None:
        if sig.samples:
            raise ValidationError(
                f"op {op!r}: samples need shapes= declaring the symbols they size",
                argument="samples",
                op=op,
            )
        return
    if callable(sig.shapes) and not isinstance(sig.shapes, Mapping):
        try:
            decl = sig.declared_shapes()
        except Exception as exc:
            raised = exc.__cause__ if isinstance(exc, RuleError) else exc
            raise ValidationError(
                f"op {op!r}: shapes(**sample_attributes) raised {type(raised).__name__}: {raised}",
                argument="shapes",
                op=op,
            ) from exc
        if decl is None:
            return
    else:
        decl = sig.shapes
    _shapes.validate(op, sig.inputs, decl)
    for sample in sig.samples:
        _shapes.validate_sample(op, decl, sample)


def _check_tolerance(op: str, argument: str, value: Tolerance) -> None:
    """A tolerance is None, a number >= 0, or a mapping dtype name -> number >= 0."""
    from .dtypes import ALL

    names = {d.name for d in ALL}
    items = value.items() if isinstance(value, Mapping) else [(None, value)]
    for key, number in items:
        if key is not None and key not in names:
            raise ValidationError(
                f"op {op!r}: {argument} names {key!r}, which is not a dtype; use one of "
                f"{', '.join(sorted(names))}",
                argument=argument,
            )
        if number is None and key is None:
            continue
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not number >= 0:
            raise ValidationError(
                f"op {op!r}: {argument} must be a number >= 0 or a mapping from dtype name to "
                f"one, got {number!r}",
                argument=argument,
            )


__all__ = [
    "DEFAULT_TOLERANCES",
    "NATIVE_VARIANT",
    "VARIANT_KINDS",
    "KernelSource",
    "OpSpec",
    "Requirement",
    "ShapeDecl",
    "Signature",
]
