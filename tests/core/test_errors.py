"""The error hierarchy (docs/contract.md): classes, attributes, top-level re-exports, messages."""

from __future__ import annotations

import pytest

import tenferro_host as tf
from tenferro_host import errors

HIERARCHY = {
    "TenferroError": Exception,
    "ValidationError": "TenferroError",
    "InvalidLayoutError": "ValidationError",
    "InvalidLaunchConfigError": "ValidationError",
    "ArgumentMismatchError": "ValidationError",
    "AliasingError": "ValidationError",
    "DTypeError": "ValidationError",
    "ShapeError": "ValidationError",
    "RuntimeStateError": "TenferroError",
    "ForeignRuntimeError": "RuntimeStateError",
    "SessionClosedError": "RuntimeStateError",
    "WrongThreadError": "RuntimeStateError",
    "ContextPoisonedError": "RuntimeStateError",
    "HostActorDiedError": "RuntimeStateError",
    "CallTimeoutError": "RuntimeStateError",
    "CaptureError": "RuntimeStateError",
    "UnsupportedError": "TenferroError",
    "BackendError": "TenferroError",
    "CompileError": "BackendError",
    "ModuleLoadError": "BackendError",
    "SymbolLookupError": "BackendError",
    "LaunchError": "BackendError",
    "SynchronizeError": "BackendError",
    "PeerAccessError": "BackendError",
    "OutOfMemoryError": "BackendError",
    "PluginError": "TenferroError",
    "RuleError": "PluginError",
    "DslError": "TenferroError",
    "RemoteOpError": "TenferroError",
}


# The builtin each family also subclasses, so callers' ``except ValueError`` etc. keep working.
BUILTIN_PARENT = {
    "ValidationError": ValueError,
    "DTypeError": TypeError,
    "RuntimeStateError": RuntimeError,
    "CallTimeoutError": TimeoutError,
    "UnsupportedError": NotImplementedError,
    "BackendError": RuntimeError,
    "OutOfMemoryError": MemoryError,
}


@pytest.mark.parametrize("name", sorted(HIERARCHY))
def test_class_exists_with_its_parent_and_is_reexported(name):
    cls = getattr(errors, name)
    parent = HIERARCHY[name]
    parent_cls = parent if isinstance(parent, type) else getattr(errors, parent)
    extra = (BUILTIN_PARENT[name],) if name in BUILTIN_PARENT else ()
    assert cls.__bases__ == (parent_cls, *extra)
    assert getattr(tf, name) is cls
    assert name in tf.__all__ and name in errors.__all__
    assert cls.__doc__


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (tf.ShapeError("bad shape"), ValueError),
        (tf.DTypeError("bad dtype"), TypeError),
        (tf.DTypeError("bad dtype"), ValueError),
        (tf.SessionClosedError("closed"), RuntimeError),
        (tf.UnsupportedError("no f64"), NotImplementedError),
        (tf.LaunchError("refused"), RuntimeError),
        (tf.OutOfMemoryError("pool exhausted", nbytes=8), MemoryError),
    ],
)
def test_errors_are_caught_by_the_builtin_a_caller_would_use(error, builtin):
    with pytest.raises(builtin):
        raise error


def test_every_error_has_op_and_says_it():
    err = tf.ShapeError("shapes differ; pass equal shapes", argument="rhs", op="pkg.add")
    assert err.op == "pkg.add" and err.argument == "rhs"
    assert str(err) == "[pkg.add] shapes differ; pass equal shapes"
    plain = tf.RuntimeStateError("busy")
    assert plain.op is None and str(plain) == "busy"


def test_validation_family_carries_argument():
    for name in HIERARCHY:
        cls = getattr(errors, name)
        if issubclass(cls, tf.ValidationError):
            assert cls("m", argument="x").argument == "x"


def test_unsupported_error_fields_and_default_reason():
    err = tf.UnsupportedError("no f64 on WebGPU", backend="webgpu", feature="f64")
    assert (err.backend, err.feature, err.reason) == ("webgpu", "f64", "no f64 on WebGPU")
    assert tf.UnsupportedError("m", reason="why").reason == "why"


def test_compile_error_fields():
    err = tf.CompileError(
        "did not compile", log="x.cu(3): error", options=["-arch=sm_90"], line=3, column=7
    )
    assert (err.log, err.options) == ("x.cu(3): error", ("-arch=sm_90",))
    assert (err.line, err.column) == (3, 7)


def test_out_of_memory_and_poisoned_fields():
    oom = tf.OutOfMemoryError("pool exhausted", nbytes=1 << 30, pool_stats={"reserved": 5})
    assert oom.nbytes == 1 << 30 and oom.pool_stats == {"reserved": 5} and oom.limit is None
    over = tf.OutOfMemoryError("too big", nbytes=8, limit="max_buffer_size")
    assert over.limit == "max_buffer_size"
    uuid = tf.CudaDeviceUuid(bytes(16))
    assert tf.ContextPoisonedError("restart", device_uuid=uuid).device_uuid == uuid


def test_dsl_error_is_located():
    err = tf.DslError(
        "`yield` is not supported; use a loop", filename="k.py", lineno=4, col_offset=8
    )
    assert (err.filename, err.lineno, err.col_offset) == ("k.py", 4, 8)
    assert str(err) == "k.py:4:8: `yield` is not supported; use a loop"


def test_backend_error_keeps_the_backend_exception_as_cause():
    with pytest.raises(tf.LaunchError) as info:
        try:
            raise OSError("driver said no")
        except OSError as exc:
            raise tf.LaunchError("launch refused") from exc
    assert isinstance(info.value.__cause__, OSError)
