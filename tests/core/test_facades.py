"""The lazy facades: every public name resolves from its provider; unknown names are errors."""

from __future__ import annotations

import pytest

import tenferro_host as tf


@pytest.mark.parametrize("facade", [tf.cuda, tf.webgpu])
def test_every_listed_name_resolves(facade):
    for name in facade.__all__:
        assert getattr(facade, name) is not None
    assert set(facade.__all__) <= set(dir(facade))


@pytest.mark.parametrize("facade", [tf.cuda, tf.webgpu, tf.cpu])
def test_unknown_name_is_an_attribute_error(facade):
    with pytest.raises(AttributeError, match="no attribute 'copy_to_device'"):
        facade.copy_to_device  # noqa: B018 - no auto-routing copy exists (docs/contract.md)
