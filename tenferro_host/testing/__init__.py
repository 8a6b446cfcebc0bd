"""The test kit for operation authors: run ops on every backend the machine has.

Installed as a pytest plugin (entry point ``pytest11``; ``-p tenferro_host.testing`` when
autoloading is off), it gives every test suite the fixtures ``host``, ``backend_name`` and
``backend`` (see :mod:`.pytest_plugin`), and this package offers:

* :func:`conformance_test` — the conformance suite of an op in one line of a test module::

    test_conformance = conformance_test("my_pkg.add")

* :func:`check_op` — run an op on random inputs and compare it with its reference::

    def test_add(host, backend_name):
        check_op(host, "my_pkg.add", backend_name, shape=(1000,), dtype="float32")

* :func:`run_conformance` — the suite from Python: a :class:`Report` with ``failures`` and
  ``skip=`` for checks by name;

* :func:`poison_fresh_memory` — fresh CPU memory holds NaN / 0xA5 bytes meanwhile.

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
    sample_inputs,
    tolerances,
)
from .conformance import (
    Report,
    cases,
    conformance_test,
    poison_fresh_memory,
    run_cases,
    run_conformance,
)

__all__ = [
    "Report",
    "accepted_dtype",
    "cases",
    "check_op",
    "compare_outputs",
    "conformance_test",
    "default_dtype",
    "download_all",
    "poison_fresh_memory",
    "random_inputs",
    "run_cases",
    "run_conformance",
    "sample_inputs",
    "tolerances",
]
