"""Registering the tests' own ops: one input ``x``, the identity as reference unless given.

A test that needs an op whose variant does something particular (raises, records a workspace,
drifts, has a requirement) registers it here instead of spelling the ``OpSpec`` out again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import tenferro_host as tf


def one_input_op(
    name: str,
    variants: Mapping[str, Callable[..., Any]],
    reference: Callable[..., Any] = lambda x: x,
    **spec: Any,
) -> tf.OpSpec:
    """The ``OpSpec`` of op ``name``, input ``x``; ``spec``: its other fields."""
    return tf.OpSpec(
        name=name,
        signature=tf.Signature(inputs=("x",)),
        reference=reference,
        variants=dict(variants),
        **spec,
    )


def register_op(host: tf.Host, package: str, spec: tf.OpSpec) -> None:
    """Add ``spec`` to ``host`` in a staging of ``package``, committed at once."""
    view = host.registry.staging(package)
    view.add_op(spec)
    view.commit()


def register_ops(
    host: tf.Host, package: str, kind: str, variants: Mapping[str, Callable[..., Any]]
) -> None:
    """Add op ``name`` (input ``x``, reference ``x``) with ``variant`` as its ``kind`` variant,
    for each ``name: variant``, in one staging of ``package`` committed at once."""
    view = host.registry.staging(package)
    for name, variant in variants.items():
        view.add_op(one_input_op(name, {kind: variant}))
    view.commit()
