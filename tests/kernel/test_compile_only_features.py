"""The compile-only ``wgsl`` target for a device with the features the caller names: subgroup
operations as the ``subgroup`` feature's builtins when asked for, the fallback through workgroup
memory otherwise; features no target knows, or a target that takes none, refused."""

from __future__ import annotations

from typing import Any

import pytest
from support import subgroup_kernels as sk

from tenferro_host import UnsupportedError, ValidationError
from tenferro_host import kernel as K
from tenferro_host.compile_only import compile_only

SUM = ["float32[1]", "float32[1]"]


def test_the_default_and_no_subgroup_feature_give_the_fallback() -> None:
    for features in (None, (), ("shader-f16",)):
        source = compile_only(sk.subgroup_sum, "wgsl", SUM, features=features).source
        assert "var<workgroup> tf_sg: array<u32, 256>;" in source
        assert "subgroupAdd" not in source and "subgroup_size" not in source


def test_the_subgroup_feature_gives_the_builtins() -> None:
    source = compile_only(sk.subgroup_sum, "wgsl", SUM, features=["subgroup"]).source
    assert "subgroupAdd(" in source and "@builtin(subgroup_size)" in source
    assert "tf_sg:" not in source


def test_a_divergent_subgroup_op_compiles_natively_but_has_no_fallback() -> None:
    kernel, sig = sk.divergent_subgroup_add, ["float32[1]"]
    assert "subgroupAdd(" in compile_only(kernel, "wgsl", sig, features=("subgroup",)).source
    with pytest.raises(UnsupportedError, match=r"no 'subgroup' feature.*top level"):
        compile_only(kernel, "wgsl", sig)


@K.kernel
def half_copy(out: K.Array[K.f16], x: K.Array[K.f16]):
    out[K.ABSOLUTE_POS] = x[K.ABSOLUTE_POS]


def test_f16_needs_shader_f16_among_the_named_features() -> None:
    sig = ["float16[1]", "float16[1]"]
    assert "enable f16;" in compile_only(half_copy, "wgsl", sig).source  # default: f16 allowed
    assert "enable f16;" in compile_only(half_copy, "wgsl", sig, features=["shader-f16"]).source
    with pytest.raises(UnsupportedError, match="'shader-f16' feature; use f32 or another"):
        compile_only(half_copy, "wgsl", sig, features=["subgroup"])


@pytest.mark.parametrize(
    "features,match",
    [
        (["subgroups"], "no feature 'subgroups'; name the device's among 'shader-f16', 'subg"),
        ("subgroup", "sequence of feature names"),
        ([1], "sequence of feature names"),
    ],
)
def test_wrong_features_are_refused(features: Any, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        compile_only(sk.subgroup_sum, "wgsl", SUM, features=features)


def test_the_cuda_target_takes_its_facts_from_arch() -> None:
    pytest.importorskip("cuda.bindings", reason="the cuda target needs the cuda extra")
    with pytest.raises(ValidationError, match=r"cuda target takes no features.*arch="):
        compile_only(sk.subgroup_sum, "cuda", SUM, features=["subgroup"])
