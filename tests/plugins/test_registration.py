"""Registration rules, in this process: OpSpec validation, API versions, duplicate providers.

Plugins here are in-memory modules handed to a PluginSet as built-ins; loading real,
installed distributions is tested in test_isolation.py.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host import _cpu as cpu_runtime
from tenferro_host import kernel as K
from tenferro_host._loader import HOST_API, PluginSet


def plugin(api: Any = HOST_API, register: Any = None) -> types.ModuleType:
    module = types.ModuleType("in_memory_plugin")
    if api is not None:
        module.TENFERRO_HOST_API = api  # type: ignore[attr-defined]
    if register is not None:
        module.tenferro_host_register = tf.hookimpl(register)  # type: ignore[attr-defined]
    return module


def load(module: types.ModuleType, *, strict: bool = False) -> PluginSet:
    plugins = PluginSet(strict=strict, disabled=frozenset())
    plugins.load([("cpu", cpu_runtime), ("in_memory", module)])  # as Host does, plus ours
    return plugins


def record(plugins: PluginSet) -> Any:
    return next(r for r in plugins.records if r.name == "in_memory")


def noop_spec(name: str = "mem.noop") -> tf.OpSpec:
    return tf.OpSpec(name, tf.Signature(inputs=("x",)), np.copy, {"cpu": lambda ex, x: x})


@pytest.mark.parametrize("api", [HOST_API, (1, 0), None])
def test_compatible_api_versions_load(api):
    plugins = load(plugin(api, lambda registry: registry.add_op(noop_spec())))
    assert record(plugins).status == "loaded"
    assert plugins.registry.ops["mem.noop"].dist == "tenferro-host"


@pytest.mark.parametrize("api", [(1, 1), (2, 0), (0, 9), (1,), [1, 0], "1.0", (1, "0")])
def test_incompatible_api_versions_are_refused(api):
    plugins = load(plugin(api, lambda registry: registry.add_op(noop_spec())))
    rec = record(plugins)
    assert rec.status == "error" and "TENFERRO_HOST_API" in rec.error
    assert "mem.noop" not in plugins.registry.ops
    with pytest.raises(tf.PluginError, match="install a plugin version built for this host"):
        load(plugin(api), strict=True)


@pytest.mark.parametrize("spi", [(2, 0), (1, 1), (0, 1), "1"])
def test_a_plugin_built_for_another_provider_spi_is_refused_by_name(spi):
    module = plugin(register=lambda registry: registry.add_op(noop_spec()))
    module.TENFERRO_HOST_SPI = spi  # type: ignore[attr-defined]
    rec = record(load(module))
    assert (
        rec.status == "error" and "TENFERRO_HOST_SPI" in rec.error and "provider SPI" in rec.error
    )
    with pytest.raises(tf.PluginError, match="in_memory"):
        load(module, strict=True)


def test_the_built_in_providers_declare_the_spi_they_build_on():
    import tenferro_host_cuda
    import tenferro_host_cuda_jit
    import tenferro_host_rocm
    import tenferro_host_webgpu

    from tenferro_host.provider import SPI_VERSION

    for module in (
        tenferro_host_cuda,
        tenferro_host_cuda_jit,
        tenferro_host_rocm,
        tenferro_host_webgpu,
    ):
        assert module.TENFERRO_HOST_SPI == SPI_VERSION


def test_add_op_takes_only_an_opspec():
    plugins = load(plugin(register=lambda registry: registry.add_op({"name": "mem.x"})))
    assert record(plugins).error == "ValidationError: add_op takes an OpSpec, got dict"


def test_a_second_provider_of_a_backend_kind_is_refused():
    def register(registry: Any) -> None:
        registry.add_op(noop_spec())
        registry.add_backend(tf.BackendProvider("cpu", lambda: None, lambda host, i: None))

    plugins = load(plugin(register=register))
    assert "backend kind 'cpu' is already provided by tenferro-host" in record(plugins).error
    assert "mem.noop" not in plugins.registry.ops  # nothing of a refused plugin is kept


def test_a_second_dsl_provider_of_a_backend_kind_is_refused():
    def register(registry: Any) -> None:
        registry.add_jit("cpu", lambda ex, op: None)

    plugins = load(plugin(register=register))
    assert "DSL provider for 'cpu' is already registered" in record(plugins).error


@pytest.mark.parametrize(
    ("kwargs", "argument", "match"),
    [
        ({"name": "add"}, "name", "namespaced by its package"),
        ({"name": "pkg."}, "name", "namespaced"),
        ({"name": "1pkg.add"}, "name", "namespaced"),
        ({"variants": {"rocm": lambda ex: None}}, "variants", "unknown variant kinds"),
        ({"reference": "np.add"}, "reference", "callable reference"),
    ],
)
def test_opspec_validation(kwargs, argument, match):
    fields = {
        "name": "pkg.add",
        "signature": tf.Signature(inputs=("x",)),
        "reference": np.copy,
        "variants": {"cpu": lambda ex, x: x},
        **kwargs,
    }
    with pytest.raises(tf.ValidationError, match=match) as info:
        tf.OpSpec(**fields)
    assert info.value.argument == argument


def test_variant_choice_prefers_native_then_dsl():
    spec = tf.OpSpec(
        "pkg.op",
        tf.Signature(inputs=("x",)),
        np.copy,
        {"cpu": lambda ex, x: x, "dsl": lambda ex, x: x},
    )
    assert spec.package == "pkg"
    assert spec.variant_kind_for("cpu", has_jit=True) == "cpu"
    assert spec.variant_kind_for("webgpu", has_jit=True) == "dsl"
    assert spec.variant_kind_for("webgpu", has_jit=False) is None
    assert spec.variant_kind_for("cuda", has_jit=True) == "dsl"


def test_without_the_rocm_provider_rocm_is_unknown():
    host = tf.Host(disabled={"rocm"})
    assert "rocm" not in [s.kind for s in host.backend_statuses()]
    with pytest.raises(tf.UnsupportedError, match="no provider plugin for backend kind 'rocm'"):
        host.backend("rocm")
    assert next(r for r in host.plugins.records if r.name == "rocm").status == "disabled"


@K.kernel
def fill(out: K.Array[K.F]):
    out[K.ABSOLUTE_POS] = 1.0


def toy_target(kernel: Any, descs: Any, constants: Any, options: Any) -> Any:
    return tf.provider.CompiledKernel(kernel.name, "toy", f"// {len(descs)} args, {options.dim}")


def toy_source(source: Any, arch: str, name: str) -> Any:
    return tf.provider.CompiledKernel(name, "toy", str(source), b"image", "toy-binary", arch)


class HostOf:
    """What compile_only needs of a Host: its registry."""

    def __init__(self, plugins: PluginSet) -> None:
        self.registry = plugins.registry


def test_a_plugin_provides_compile_targets_that_compile_only_finds():
    from tenferro_host.compile_only import compile_only, compile_source

    def register(registry: Any) -> None:
        registry.add_compile_target("toy", toy_target)
        registry.add_source_compiler("toy", toy_source)

    host: Any = HostOf(load(plugin(register=register)))
    assert "toy" in host.registry.compile_targets()
    out = compile_only(fill, "toy", ["float32[1]"], dim=(64, 1, 1), host=host)
    assert (out.kernel, out.target, out.source) == ("fill", "toy", "// 1 args, (64, 1, 1)")
    image = compile_source("x", language="toy", arch="a1", name="k.toy", host=host)
    assert (image.image, image.image_kind, image.arch) == (b"image", "toy-binary", "a1")
    with pytest.raises(tf.UnsupportedError, match="no plugin registered a 'metal' source compiler"):
        compile_source("x", language="metal", host=host)


def test_a_compile_target_registered_twice_is_refused():
    def register(registry: Any) -> None:
        registry.add_compile_target("toy", toy_target)

    plugins = PluginSet(strict=False, disabled=frozenset())
    plugins.load(
        [
            ("cpu", cpu_runtime),
            ("first", plugin(register=register)),
            ("second", plugin(register=register)),
        ]
    )
    second = next(r for r in plugins.records if r.name == "second")
    assert second.status == "error"
    assert "the compile target 'toy' is already registered by tenferro-host" in second.error
