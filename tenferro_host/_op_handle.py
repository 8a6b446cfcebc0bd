"""Op handles: an operation resolved once, then called at the cost of its checks.

``host.op(name)`` looks the op up in the registry, reads its signature (input count, attribute
types, dtype and shape rules) and picks its variant per runtime kind once; calling the handle
then does only what the contract requires per call — inputs are tensors of the session's
allocation domain, attributes have their declared types, and the variant's outputs are Tensors
of the session's runtime with the dtypes and shapes the signature's rules give. ``host.run``
and ``ex.run`` go through the same handles (the torch.ops idea: resolve by name once).

>>> import numpy as np, tenferro_host as tf
>>> host = tf.Host()
>>> spec = tf.OpSpec(
...     name="doc.scale",
...     signature=tf.Signature(inputs=("x",), attributes={"factor": float}),
...     reference=lambda x, factor=1.0: x * factor,
...     variants={"cpu": lambda ex, x, factor=1.0: ex.runtime.upload(x.download() * factor)},
... )
>>> view = host.registry.staging("doc"); view.add_op(spec); view.commit()
>>> scale = host.op("doc.scale")
>>> x = host.backend("cpu").upload(np.ones(2, np.float32))
>>> scale(x, factor=3).download().tolist()  # an int where a float is declared converts
[3.0, 3.0]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from .dtypes import DType, dtype
from .errors import (
    DTypeError,
    ForeignRuntimeError,
    ShapeError,
    UnsupportedError,
    ValidationError,
)
from .provider import _op_plan
from .provider._compiled import CALL, Unplanned, compiled_method
from .provider._op_plan import REPLAY_MISS
from .provider._plan_table import BLOCKED, Learning, PlanTable
from .provider._storage import require_writable
from .tensor import Tensor

if TYPE_CHECKING:
    from ._host import Host
    from ._rules import Rule
    from .ops import OpSpec
    from .provider._exec_session import ExecSession
    from .provider._op_replay import OpReplay
    from .provider._registry import OpRecord
    from .provider._runtime import Runtime


class OpHandle:
    """A registered op resolved once: call it like ``host.run(name, ...)`` without the name.

    ``handle(*tensors, backend=None, **attrs)`` opens a session on the tensors' runtime;
    ``handle.run_in(ex, tensors, attrs)`` runs inside an open exec session (what ``ex.run``
    does). The variant chosen for each runtime kind is cached in the handle.
    """

    __slots__ = (
        "_attr_types",
        "_dtype_rule",
        "_host",
        "_inputs",
        "_ops",
        "_outputs",
        "_plans",
        "_same",
        "_shape_rule",
        "_variants",
        "name",
        "record",
        "spec",
    )

    def __init__(self, host: Host, record: OpRecord) -> None:
        assert record.spec is not None
        self._host = host
        self.record = record
        self.spec: OpSpec = record.spec
        self.name = record.name
        #: the registry's ops (one dict for the host's life): a replaced op is a new record there
        self._ops: Mapping[str, OpRecord] = host.registry.ops
        sig = self.spec.signature
        self._inputs = tuple(sig.inputs)
        self._outputs = tuple(sig.outputs)
        self._attr_types = dict(sig.attributes)
        self._dtype_rule, self._shape_rule = sig.rule("dtype_rule"), sig.rule("shape_rule")
        self._same = len(self._outputs) == 1 and self._dtype_rule is self._shape_rule is None
        #: runtime kind -> (variant kind, variant callable)
        self._variants: dict[str, tuple[str, Callable[..., Any]]] = {}
        #: call key -> its replay, or what the key's recordings gave so far
        self._plans = PlanTable()

    def __repr__(self) -> str:
        return f"<OpHandle {self.name}>"

    def __call__(self, *tensors: Any, backend: str | None = None, **attrs: Any) -> Any:
        """Run the op on the backend its first tensor lives on (or ``backend``), in a session.

        A call whose key was planned replays (see :mod:`tenferro_host.provider._op_plan`);
        any other takes the full path below, recorded so that its key can be planned.
        """
        if backend is None and tensors and _op_plan.ENABLED:
            plans = self._plans
            if CALL is None:
                key, plan = plans.find(tensors, attrs)
            else:  # the key, the lookup and a replay in C; what is not planned comes back
                result = CALL(plans, tensors, attrs)
                if type(result) is not Unplanned:
                    return result
                key, plan = result
            if key is not None:
                runtime = key[4]
                if plan is None or type(plan) is Learning:
                    call = partial(self._call_full, runtime, tensors, attrs)
                    return plans.call_recorded(runtime, tensors, key, plan, call)
                if plan is not BLOCKED:
                    result = plan(tensors)
                    if result is not REPLAY_MISS:
                        return result
                return self._call_full(runtime, tensors, attrs)
        return self._call_full(self._runtime_of(tensors, backend), tensors, attrs)

    def _runtime_of(self, tensors: Sequence[Any], backend: str | None) -> Runtime:
        if backend is not None:
            return self._host.backend(backend)
        if tensors:
            first = tensors[0]
            if type(first) is Tensor:
                return first.storage.runtime
            return owner(first, self._inputs[0] if self._inputs else "tensors", self.name)
        raise ValidationError(
            f"op {self.name!r} got no tensors; pass tensors or backend=...",
            argument="tensors",
            op=self.name,
        )

    def _call_full(self, runtime: Runtime, tensors: Sequence[Any], attrs: dict[str, Any]) -> Any:
        capture = runtime.active_capture
        if capture is not None:
            return capture.routed(self, tuple(tensors), attrs)
        with runtime.session() as s:
            return self.run_in(s._exec, tensors, attrs)  # just opened: no check to repeat

    def plans(self) -> dict[str, str]:
        """Each call key's state, for the bench and ``ops``: "replay" or why the full path."""
        return self._plans.states()

    def prepared(self, key: tuple[Any, ...], attrs: dict[str, Any]) -> OpReplay | None:
        """The replay planned for a call whose inputs' part of the key is ``key`` (per input
        its dtype, shape, strides, offset and runtime, as :meth:`PlanTable.find
        <tenferro_host.provider._plan_table.PlanTable.find>` builds it) and attributes
        ``attrs``, if it writes no input: what a framework bridge launches on its own buffers
        (:meth:`OpReplay.launch_buffers`). None: not planned, blocked, or writing an input (the
        bridge's call takes the handle's own path, which plans it)."""
        if not _op_plan.ENABLED:
            return None
        plan = self._plans.lookup(key, attrs)[1]
        if plan is None or plan is BLOCKED or type(plan) is Learning or plan.exclusive:
            return None
        return plan

    def forget_plans(self) -> None:
        """Drop every plan: the next calls take the full path and learn again (a test's way to
        see both paths, or a switch changed in the environment taking effect)."""
        self._plans.clear()

    def run_in(self, ex: ExecSession, tensors: Sequence[Any], attrs: dict[str, Any]) -> Any:
        """Run the op inside the open exec session ``ex``; check inputs, attributes, outputs."""
        name = self.name
        inputs = self._inputs
        if len(tensors) != len(inputs):
            raise self._arity_error(tensors)
        if attrs:
            attrs = self._checked_attributes(attrs)
        runtime = ex.runtime
        domain = runtime.domain
        for arg, t in zip(inputs, tensors, strict=True):
            rt = t.storage.runtime if type(t) is Tensor else owner(t, arg, name)
            if rt.domain is not domain and rt.domain != domain:
                raise ForeignRuntimeError(
                    f"input {arg!r} lives on {rt.name!r}, the session runs on "
                    f"{runtime.name!r}; move it explicitly (upload/download or a copy_from_*)",
                    op=name,
                )
        chosen = self._variants.get(runtime.kind)
        if chosen is None:
            chosen = self._resolve_variant(runtime)
        result = chosen[1](ex, *tensors, **attrs)
        if (
            self._same
            and type(result) is Tensor
            and tensors
            and result.storage.runtime is runtime
            and result.dtype is tensors[0].dtype
            and result.shape == tensors[0].shape
            and not result.storage.read_only
        ):
            return result  # one output as the "same" rules give: the common case, inline
        self._check_outputs(result, tensors, runtime, chosen[0], attrs)
        return result

    # -- resolved once ---------------------------------------------------------------------------
    def _resolve_variant(self, runtime: Runtime) -> tuple[str, Callable[..., Any]]:
        has_jit = self._host.registry.jit_factory(runtime.kind) is not None
        kind = self.spec.variant_kind_for(runtime.kind, has_jit)
        if kind is None:
            raise self.spec.no_variant_error(runtime.name)
        reason = self.spec.unavailable_reason(kind)
        if reason is not None:  # refused up front, from the declared reason; no fallback
            requirement = self.spec.variant_requirements[kind]
            raise UnsupportedError(
                f"op {self.name!r}: its {kind!r} variant cannot run on {runtime.name!r}: {reason}",
                backend=runtime.name,
                feature=requirement.feature,
                reason=reason,
                op=self.name,
            )
        chosen = self._variants[runtime.kind] = (kind, self.spec.variants[kind])
        return chosen

    # -- per-call checks (each done once) ----------------------------------------------------------
    def _arity_error(self, tensors: Sequence[Any]) -> ValidationError:
        inputs = self._inputs
        message = (
            f"op {self.name!r} takes {len(inputs)} tensors ({', '.join(inputs)}), "
            f"got {len(tensors)}"
        )
        extra = [t for t in tensors[len(inputs) :] if not isinstance(t, Tensor)]
        if len(tensors) > len(inputs) and extra:
            if self._attr_types:
                example = ", ".join(
                    f"{a}={v!r}" for a, v in zip(self._attr_types, extra, strict=False)
                )
                message += (
                    f"; attributes go by keyword, e.g. host.run({self.name!r}, ..., {example})"
                )
            else:
                message += "; it takes no attributes"
        return ValidationError(message, argument="tensors", op=self.name)

    def _checked_attributes(self, attrs: dict[str, Any]) -> dict[str, Any]:
        declared = self._attr_types
        unknown = [a for a in attrs if a not in declared]
        if unknown:
            raise self.spec.unknown_attributes_error(unknown)
        converted = None
        for key, value in attrs.items():
            want = declared[key]
            if type(value) is want:
                continue
            good = convert_attribute(value, want)
            if good is _REFUSED:
                raise ValidationError(
                    f"op {self.name!r}: attribute {key!r} is declared {want.__name__}, "
                    f"got {type(value).__name__} {value!r}",
                    argument=key,
                    op=self.name,
                )
            if converted is None:
                converted = dict(attrs)
            converted[key] = good
        return attrs if converted is None else converted

    def _check_outputs(
        self,
        result: Any,
        tensors: Sequence[Any],
        runtime: Runtime,
        variant: str,
        attrs: Mapping[str, Any],
    ) -> None:
        outputs = self._outputs
        if len(outputs) == 1:
            values: Sequence[Any] = (result,)
        elif isinstance(result, (tuple, list)) and len(result) == len(outputs):
            values = result
        else:
            got = (
                f"{len(result)} values"
                if isinstance(result, (tuple, list))
                else f"a {type(result).__name__}"
            )
            raise ValidationError(
                f"op {self.name!r} (variant {variant!r}) declares {len(outputs)} outputs "
                f"({', '.join(outputs)}) and returned {got}",
                argument="outputs",
                op=self.name,
            )
        dtypes = shapes = None
        for i, (out_name, value) in enumerate(zip(outputs, values, strict=True)):
            where = f"op {self.name!r} (variant {variant!r}) output {out_name!r}"
            if type(value) is not Tensor and not isinstance(value, Tensor):
                raise ValidationError(
                    f"{where} is a {type(value).__name__}, not a Tensor of {runtime.name!r}; "
                    "allocate outputs with the session's runtime",
                    argument=out_name,
                    op=self.name,
                )
            rt = value.storage.runtime
            if rt is not runtime:
                raise ForeignRuntimeError(
                    f"{where} lives on {rt.name!r}, the session runs on {runtime.name!r}; "
                    "allocate outputs with the session's runtime",
                    op=self.name,
                )
            require_writable(
                value,
                f"{where} is a tensor the caller may write",
                out_name,
                self.name,
                fix="allocate outputs with the session's runtime",
            )
            if not tensors:
                continue  # no inputs: the rules have nothing to derive from
            if dtypes is None:
                n, name = len(outputs), self.name
                dtypes = output_rule(self._dtype_rule, [t.dtype for t in tensors], n, attrs, name)
                shapes = output_rule(self._shape_rule, [t.shape for t in tensors], n, attrs, name)
            assert shapes is not None
            want_dtype = dtypes[i]
            if value.dtype is not want_dtype and value.dtype != dtype(want_dtype):
                raise DTypeError(
                    f"{where} is {value.dtype.name}; the signature's dtype rule gives "
                    f"{dtype(want_dtype).name}",
                    argument=out_name,
                    op=self.name,
                )
            if value.shape != tuple(shapes[i]):
                raise ShapeError(
                    f"{where} has shape {value.shape}; the signature's shape rule gives "
                    f"{tuple(shapes[i])}",
                    argument=out_name,
                    op=self.name,
                )


_REFUSED = object()


def convert_attribute(value: Any, want: type) -> Any:
    """``value`` as the declared type ``want``, or ``_REFUSED``: an int (or numpy integer)
    converts where a float is declared, a numpy scalar to its Python type; bools stay bools."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value) if want is bool else _REFUSED
    if want is float and isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    if want is int and isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, want):
        return value
    return _REFUSED


def output_rule(
    rule: Rule | None,
    values: Sequence[Any],
    n_outputs: int,
    attrs: Mapping[str, Any] | None,
    op: str,
) -> tuple[Any, ...]:
    """What a ``dtype_rule``/``shape_rule`` of op ``op`` (``Signature.rule``) gives for the
    inputs' dtypes or shapes, one per output: None (``"same"``) repeats the first input's (None
    without inputs); a rule returns one value (a single output) or a tuple of ``n_outputs``."""
    if rule is None:
        return (values[0] if values else None,) * n_outputs  # no inputs: nothing to derive
    got = rule(op, values, attrs)
    if n_outputs == 1 and not _is_sequence_of_outputs(got):
        return (got,)
    return tuple(got)


def _is_sequence_of_outputs(value: Any) -> bool:
    """A shape rule's single shape is a tuple of ints; several outputs are a tuple of shapes."""
    if isinstance(value, (str, DType)) or not isinstance(value, (tuple, list)):
        return False
    return bool(value) and not isinstance(value[0], (int, np.integer))


def owner(t: Any, argument: str = "tensors", op: str | None = None) -> Runtime:
    """The runtime of tensor ``t``; a typed error naming ``argument`` for anything else."""
    if isinstance(t, Tensor):
        return t.storage.runtime
    if hasattr(t, "__array__"):
        raise ForeignRuntimeError(
            f"{argument} is a {type(t).__name__}, not a tensor; upload it first (backend.upload)",
            op=op,
        )
    raise ValidationError(
        f"{argument} must be a Tensor, got {type(t).__name__}", argument=argument, op=op
    )


# (``CALL`` and ``ENABLED`` read per call from these modules' globals: tests switch them)
compiled_method(OpHandle, "__call__", globals(), vars(_op_plan))

__all__ = ["OpHandle", "convert_attribute", "output_rule", "owner"]
