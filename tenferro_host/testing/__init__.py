"""The test kit for operation authors: run ops on every backend the machine has.

Installed as a pytest plugin (entry point ``pytest11``), it gives every test suite two fixtures:

* ``host`` — a fresh :class:`tenferro_host.Host`;
* ``backend_name`` — parametrised over the backends of this machine: ``cpu`` always, ``cuda``
  and ``webgpu`` when available (marked ``cuda``/``webgpu``/``gpu``; skipped with the reason
  otherwise), so one test covers every backend and still passes on a machine with no GPU.

and :func:`check_op`, which runs an op on random inputs and compares it with its reference::

    from tenferro_host.testing import check_op

    def test_add(host, backend_name):
        check_op(host, "my_pkg.add", backend_name, shape=(1000,), dtype="float32")

Importing this package loads no GPU library and not pytest.

>>> import tenferro_host as tf
>>> out = check_op(tf.Host(), "ext_add_kernel.add", "cpu", shape=3)
>>> out[0].shape
(3,)
"""

from .checks import (
    accepted_dtype,
    check_op,
    compare_outputs,
    default_dtype,
    download_all,
    random_inputs,
    tolerances,
)

__all__ = [
    "accepted_dtype",
    "check_op",
    "compare_outputs",
    "default_dtype",
    "download_all",
    "random_inputs",
    "tolerances",
]
