"""Run an op on random inputs and compare it with its numpy reference.

Shared by the pytest kit (:func:`check_op`) and the CLI (``tenferro-host run --check``); it
imports nothing from pytest.

>>> import numpy as np
>>> compare_outputs([np.ones(3, np.float32)], [np.ones(3, np.float32)], ("out",))
>>> print(compare_outputs([np.zeros(3)], [np.ones(3)], ("out",)))  # doctest: +ELLIPSIS
output 'out' differs from the reference at 3 of 3 elements (first at index (0,): ...)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._op_handle import output_rule
from ..dtypes import DType
from ..dtypes import dtype as resolve_dtype
from ..errors import DTypeError
from ..ops import DEFAULT_TOLERANCES, OpSpec, Signature
from ..tensor import Tensor

if TYPE_CHECKING:
    from .._host import Host
    from ..provider._runtime import Runtime


def default_dtype(signature: Signature) -> DType:
    """float32 when the op accepts it, else the first dtype it lists."""
    names = signature.dtypes
    return resolve_dtype("float32" if "float32" in names else names[0])


def accepted_dtype(signature: Signature, name: Any, op: str) -> DType:
    """``name`` as a DType, or DTypeError if the op's signature does not accept it."""
    dt = resolve_dtype(name)
    if dt.name not in signature.dtypes:
        raise DTypeError(
            f"op {op!r} does not accept {dt.name}; use one of {', '.join(signature.dtypes)}",
            argument="dtype",
            op=op,
        )
    return dt


def random_array(rng: np.random.Generator, dt: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Random values of ``dt`` that every op of the kind "elementwise" can take without overflow.

    >>> random_array(np.random.default_rng(0), resolve_dtype("int32"), (2, 3)).dtype
    dtype('int32')
    """
    if dt.category == "float":
        return rng.standard_normal(shape).astype(dt.numpy)
    if dt.category == "complex":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt.numpy)
    if dt.category == "int":
        return rng.integers(-1000, 1000, size=shape).astype(dt.numpy)
    if dt.category == "uint":
        return rng.integers(0, 1000, size=shape).astype(dt.numpy)
    return rng.integers(0, 2, size=shape).astype(bool)


def random_inputs(
    signature: Signature, shape: tuple[int, ...], dt: DType, seed: int = 0
) -> list[np.ndarray]:
    """One random array per input of ``signature``, all of ``shape`` and ``dt``."""
    return random_arrays([shape] * len(signature.inputs), dt, seed)


def random_arrays(shapes: Sequence[tuple[int, ...]], dt: DType, seed: int = 0) -> list[np.ndarray]:
    """One random array of ``dt`` per shape of ``shapes``."""
    rng = np.random.default_rng(seed)
    return [random_array(rng, dt, tuple(shape)) for shape in shapes]


def sample_inputs(
    signature: Signature,
    dt: DType,
    shape: tuple[int, ...] | None = None,
    seed: int = 0,
    attributes: Mapping[str, Any] | None = None,
    elements: int = 1_000_000,
) -> list[np.ndarray]:
    """Random inputs of a sample call: shapes from :meth:`Signature.input_shapes`.

    >>> import tenferro_host as tf
    >>> sig = tf.Signature(inputs=("a", "b"), shapes={"a": ("m", "k"), "b": ("k", "n")})
    >>> [a.shape for a in sample_inputs(sig, tf.float32, (2, 3))]
    [(2, 3), (3, 3)]
    """
    return random_arrays(signature.input_shapes(shape, attributes, elements), dt, seed)


def as_outputs(result: Any) -> list[Any]:
    """An op's result (one value or a tuple/list of them) as a list."""
    return list(result) if isinstance(result, (tuple, list)) else [result]


def download_all(result: Any) -> list[np.ndarray]:
    """Download every tensor of an op's result (other values pass through numpy)."""
    return [o.download() if isinstance(o, Tensor) else np.asarray(o) for o in as_outputs(result)]


def tolerances(
    dt: DType,
    rtol: float | None = None,
    atol: float | None = None,
    spec: OpSpec | None = None,
    shapes: Sequence[tuple[int, ...]] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> tuple[float, float]:
    """(rtol, atol) for comparing results of dtype ``dt``: explicit values, else the op's rule
    for inputs of ``shapes`` (:meth:`OpSpec.tolerance`), else the defaults.

    >>> tolerances(resolve_dtype("float32")), tolerances(resolve_dtype("float32"), rtol=0.1)
    ((1e-05, 1e-06), (0.1, 1e-06))
    """
    if spec is not None:
        d_rtol, d_atol = spec.tolerance(dt.name, shapes, attributes)
    else:
        d_rtol, d_atol = DEFAULT_TOLERANCES.get(dt.name, (0.0, 0.0))
    return (d_rtol if rtol is None else rtol, d_atol if atol is None else atol)


def expected_outputs(
    spec: OpSpec, inputs: Sequence[Tensor], attributes: Mapping[str, Any] | None = None
) -> list[tuple[DType | None, tuple[int, ...] | None]]:
    """(dtype, shape) of every output that the op's ``dtype_rule``/``shape_rule`` give.

    ``"same"`` means every output has the first input's dtype (shape); a callable takes the
    input dtypes (shapes) positionally and the attributes it names by keyword, and returns one
    value or one per output (:func:`tenferro_host._op_handle.output_rule`).
    """
    sig, op = spec.signature, spec.name
    n = len(sig.outputs)
    dtype_rule, shape_rule = sig.rule("dtype_rule"), sig.rule("shape_rule")
    dtypes = [
        None if d is None else resolve_dtype(d)
        for d in output_rule(dtype_rule, [t.dtype for t in inputs], n, attributes, op)
    ]
    shapes = [
        None if s is None else tuple(s)
        for s in output_rule(shape_rule, [t.shape for t in inputs], n, attributes, op)
    ]
    return list(zip(dtypes, shapes, strict=True))


def output_problem(
    spec: OpSpec,
    variant: str,
    runtime: Runtime,
    inputs: Sequence[Tensor],
    result: Any,
    attributes: Mapping[str, Any] | None = None,
) -> str | None:
    """None when ``result`` is what the op declares (Tensors of ``runtime`` with the rule's
    dtypes and shapes), else what is wrong, naming the op and the variant."""
    outputs = as_outputs(result)
    where = f"op {spec.name!r}, variant {variant!r} on {runtime.name}"
    names = spec.signature.outputs
    if len(outputs) != len(names):
        declared = f"{len(names)} ({', '.join(names)})"
        return f"{where} returned {len(outputs)} outputs; it declares {declared}"
    expected = expected_outputs(spec, inputs, attributes)
    for name, out, (dt, shape) in zip(names, outputs, expected, strict=True):
        if not isinstance(out, Tensor):
            return (
                f"{where} returned a {type(out).__name__} as output {name!r}, not a Tensor; "
                "allocate outputs with ex.runtime.empty or alloc_output"
            )
        if out.storage.runtime.domain != runtime.domain:
            return (
                f"{where} returned output {name!r} on {out.storage.runtime.name}, not on the "
                "session's runtime; allocate it in the session"
            )
        if dt is not None and out.dtype is not dt:
            return (
                f"{where} returned output {name!r} as {out.dtype.name}; "
                f"its dtype_rule says {dt.name}"
            )
        if shape is not None and out.shape != shape:
            return (
                f"{where} returned output {name!r} with shape {out.shape}; "
                f"its shape_rule says {shape}"
            )
    return None


def compare_outputs(
    got: Sequence[np.ndarray],
    expected: Sequence[Any],
    names: Sequence[str],
    rtol: float | None = None,
    atol: float | None = None,
    spec: OpSpec | None = None,
    shapes: Sequence[tuple[int, ...]] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> str | None:
    """None when every output matches its reference, else a message about the first mismatch.

    Tolerances: explicit ``rtol``/``atol``, else the op's rule (``spec``) for inputs of
    ``shapes`` with ``attributes``, else the defaults."""
    if len(got) != len(expected):
        return f"the op returned {len(got)} outputs, its reference {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        name = names[i] if i < len(names) else f"#{i}"
        e = np.asarray(e)
        if g.shape != e.shape:
            return f"output {name!r} has shape {g.shape}, the reference {e.shape}"
        r, a = tolerances(resolve_dtype(g.dtype), rtol, atol, spec, shapes, attributes)
        close = np.isclose(g, e, rtol=r, atol=a, equal_nan=True)
        if not close.all():
            bad = np.argwhere(~close)
            first = tuple(int(v) for v in bad[0])
            return (
                f"output {name!r} differs from the reference at {len(bad)} of {g.size} "
                f"elements (first at index {first}: got {g[first]!r}, expected {e[first]!r}; "
                f"rtol={r}, atol={a})"
            )
    return None


def check_op(
    host: Host,
    name: str,
    backend: str,
    shape: tuple[int, ...] | int | None = None,
    dtype: Any = None,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    attrs: Mapping[str, Any] | None = None,
) -> list[np.ndarray]:
    """Run op ``name`` on ``backend`` with random inputs; AssertionError if it differs from
    its reference (within the op's tolerance rule). Returns the downloaded outputs.

    ``shape`` is every input's shape, or for an op that declares its shapes the first input's
    (:meth:`Signature.input_shapes`); by default (1000,), or the op's first sample (else about
    1000 elements). ``attrs`` default to the op's ``sample_attributes``.

    >>> import tenferro_host as tf
    >>> out = check_op(tf.Host(), "ext_add_kernel.add", "cpu", shape=(4, 3), dtype="int32")
    >>> out[0].shape, out[0].dtype
    ((4, 3), dtype('int32'))
    """
    spec = host.registry.op(name).spec
    assert spec is not None
    sig = spec.signature
    dt = default_dtype(sig) if dtype is None else accepted_dtype(sig, dtype, name)
    dims = (shape,) if isinstance(shape, int) else None if shape is None else tuple(shape)
    attributes = sig.attributes_or_samples(attrs)
    arrays = sample_inputs(sig, dt, dims, seed, attributes, elements=1000)
    runtime = host.backend(backend)
    tensors = [runtime.upload(a) for a in arrays]
    result = host.run(name, *tensors, backend=runtime.name, **attributes)
    kind = host.variants_by_backend(name).get(runtime.kind, "?")
    problem = output_problem(spec, kind, runtime, tensors, result, attributes)
    if problem is not None:
        raise AssertionError(problem)
    got = download_all(result)
    expected = as_outputs(spec.reference(*arrays, **attributes))
    shapes = [a.shape for a in arrays]
    problem = compare_outputs(got, expected, sig.outputs, rtol, atol, spec, shapes, attributes)
    if problem is not None:
        what = f"shape {shapes[0]}" if len(set(shapes)) == 1 else f"shapes {shapes}"
        raise AssertionError(f"{name} on {runtime.name} ({dt.name}, {what}): {problem}")
    return got


__all__ = [
    "accepted_dtype",
    "as_outputs",
    "check_op",
    "compare_outputs",
    "default_dtype",
    "download_all",
    "expected_outputs",
    "output_problem",
    "random_array",
    "random_arrays",
    "random_inputs",
    "sample_inputs",
    "tolerances",
]
