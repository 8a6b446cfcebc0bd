"""Registering the tests' own ops: one input ``x``, the identity as reference, one variant each.

A test that needs an op whose variant does something particular (raises, records a workspace,
drifts) registers it here instead of spelling the ``OpSpec`` out again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import tenferro_host as tf


def register_ops(
    host: tf.Host, package: str, kind: str, variants: Mapping[str, Callable[..., Any]]
) -> None:
    """Add op ``name`` (input ``x``, reference ``x``) with ``variant`` as its ``kind`` variant,
    for each ``name: variant``, in one staging of ``package`` committed at once."""
    view = host.registry.staging(package)
    for name, variant in variants.items():
        view.add_op(
            tf.OpSpec(
                name=name,
                signature=tf.Signature(inputs=("x",)),
                reference=lambda x: x,
                variants={kind: variant},
            )
        )
    view.commit()
