"""Plugin isolation with real fixture distributions, found through their entry points.

One subprocess per fixture set checks many things and prints them as JSON (CI has 2 cores).
"""

from __future__ import annotations

import pytest

#: What both probes start with: a fresh host, and ``strict()``, what a fresh Host raises with
#: TENFERRO_STRICT_PLUGINS=1 (None: nothing), which leaves strict mode on.
PROBE_START = """
import json, os
import numpy as np
import tenferro_host as tf

def strict():
    os.environ["TENFERRO_STRICT_PLUGINS"] = "1"
    try:
        tf.Host().plugins
    except tf.PluginError as exc:
        return str(exc)
    return None

out = {}
host = tf.Host()
"""

FAULTY_PROBE = (
    PROBE_START
    + """
plugins = host.plugins
out["records"] = {r.name: [r.dist, r.version, r.status, r.error] for r in plugins.records}
out["ops"] = sorted(host.registry.ops)
out["registered"] = sorted(name for name, _ in plugins.pm.list_name_plugin())
cpu = host.backend("cpu")
a = cpu.upload(np.arange(4, dtype=np.float32))
out["add"] = host.run("ext_add_kernel.add", a, a).download().tolist()
out["rocm"] = host.backend_status("rocm").available

import tf_fixture_observer
out["observe"] = [plugins.observe_started, plugins.observe_finished]
tf_fixture_observer.EVENTS.clear()
with cpu.session():
    pass
try:
    with cpu.session():
        raise ValueError("body failed")
except ValueError:
    pass
out["events"] = list(tf_fixture_observer.EVENTS)
out["observer_raised"] = {}
for hook in ("started", "finished"):
    tf_fixture_observer.RAISE_IN = {hook}
    try:
        with cpu.session():
            pass
    except tf.PluginError as exc:
        out["observer_raised"][hook] = str(exc)
    out["exec_closed_after_" + hook] = tf_fixture_observer.EXEC_SESSIONS[-1].closed
    tf_fixture_observer.RAISE_IN = set()
    with cpu.session():  # a failing observer leaves the runtime usable
        pass

out["strict"] = strict()
failed = [r.name for r in plugins.records if r.status == "error"]
os.environ["TENFERRO_DISABLE_PLUGINS"] = ",".join(failed)
strict_clean = tf.Host()
out["strict_with_failures_disabled"] = {r.name: r.status for r in strict_clean.plugins.records}

del os.environ["TENFERRO_STRICT_PLUGINS"]
os.environ["TENFERRO_DISABLE_PLUGINS"] = " tf_fixture_broken_import , tf_fixture_observer,"
quiet = tf.Host()
out["disabled"] = {r.name: [r.status, r.error] for r in quiet.plugins.records}
out["observe_disabled"] = [quiet.plugins.observe_started, quiet.plugins.observe_finished]
print(json.dumps(out))
"""
)

COLLIDE_PROBE = (
    PROBE_START
    + """
rec = host.registry.ops["ext_add_kernel.add"]
out["op"] = [rec.status, rec.conflicting, rec.spec is None]
out["variants"] = host.variants_by_backend("ext_add_kernel.add")
out["records"] = {r.name: r.status for r in host.plugins.records}
a = host.backend("cpu").upload(np.ones(2, np.float32))
try:
    host.run("ext_add_kernel.add", a, a)
    out["run"] = None
except tf.PluginError as exc:
    out["run"] = str(exc)
failed = [r.name for r in host.plugins.records if r.status == "error"]
os.environ["TENFERRO_DISABLE_PLUGINS"] = ",".join(failed)
out["strict"] = strict()
os.environ["TENFERRO_DISABLE_PLUGINS"] = ",".join([*failed, "tf_fixture_collide"])
rec = tf.Host().registry.ops.get("ext_add_kernel.add")
out["strict_without_collide"] = rec.status if rec else f"missing; disabled: {failed}"
print(json.dumps(out))
"""
)

FAILING = {
    "tf_fixture_broken_import": "fails to import on purpose",
    "tf_fixture_raising_register": "fails in its hook on purpose",
    "tf_fixture_wrong_api": "TENFERRO_HOST_API (2, 0)",
    "tf_fixture_unknown_arg": "colour",
}


@pytest.fixture(scope="module")
def faulty(fixture_dists, subproc):
    return subproc.json(FAULTY_PROBE, (fixture_dists.faulty,))


@pytest.fixture(scope="module")
def collide(fixture_dists, subproc):
    return subproc.json(COLLIDE_PROBE, (fixture_dists.collide,))


@pytest.mark.parametrize("name", sorted(FAILING))
def test_each_failure_is_recorded_with_dist_version_and_error(faulty, name):
    dist, version, status, error = faulty["records"][name]
    assert (dist, version, status) == (name.replace("_", "-"), "1.0", "error")
    assert FAILING[name] in error
    assert name not in faulty["registered"]  # nothing of it stays in the plugin manager


def test_error_names_the_exception_type(faulty):
    assert faulty["records"]["tf_fixture_broken_import"][3].startswith("ImportError: ")
    assert faulty["records"]["tf_fixture_raising_register"][3].startswith("RuntimeError: ")
    assert faulty["records"]["tf_fixture_wrong_api"][3].startswith("PluginError: ")


def test_failed_plugins_register_nothing(faulty):
    assert "tf_fixture_raising_register.noop" not in faulty["ops"]  # added, then the hook raised
    assert "tf_fixture_wrong_api.noop" not in faulty["ops"]


def test_everything_else_still_works(faulty):
    for name in ("cpu", "ext_add_kernel", "rocm", "tf_fixture_observer", "tf_fixture_wrong_op"):
        assert faulty["records"][name][2] == "loaded", faulty["records"][name]
    assert faulty["add"] == [0.0, 2.0, 4.0, 6.0]
    assert {"ext_add_kernel.add", "tf_fixture_wrong_op.add"} <= set(faulty["ops"])
    assert faulty["rocm"] is False


def test_observers_are_called_when_implemented(faulty):
    assert faulty["observe"] == [True, True]
    assert faulty["events"] == [
        ["started", "cpu:0", None],
        ["finished", "cpu:0", None],
        ["started", "cpu:0", None],
        ["finished", "cpu:0", "ValueError"],
    ]


def test_a_failing_observer_raises_plugin_error(faulty):
    raised = faulty["observer_raised"]
    assert set(raised) == {"started", "finished"}
    for hook, message in raised.items():
        assert f"tenferro_host_session_{hook} observer raised RuntimeError" in message
        assert f"the {hook} observer fails on purpose" in message
        assert faulty["exec_closed_after_" + hook]  # the session's exec session ended too


def test_strict_env_makes_a_failure_fatal(faulty):
    message = faulty["strict"]
    assert message is not None
    assert "failed" in message and "TENFERRO_DISABLE_PLUGINS" in message


def test_strict_passes_once_the_failing_plugins_are_disabled(faulty):
    statuses = faulty["strict_with_failures_disabled"]
    for name in FAILING:
        assert statuses[name] == "disabled"
    assert statuses["ext_add_kernel"] == "loaded"


def test_disable_plugins_blocks_by_name(faulty):
    disabled = faulty["disabled"]
    assert disabled["tf_fixture_broken_import"] == ["disabled", None]
    assert disabled["tf_fixture_observer"] == ["disabled", None]
    assert disabled["tf_fixture_raising_register"][0] == "error"  # not named: still tried
    assert faulty["observe_disabled"] == [False, False]


def test_collision_drops_both_and_names_both_distributions(collide):
    status, conflicting, no_spec = collide["op"]
    assert status == "conflict" and no_spec
    assert conflicting == ["ext-add-kernel", "tf-fixture-collide"]
    assert collide["variants"] == {}
    assert collide["records"]["tf_fixture_collide"] == "loaded"
    assert collide["records"]["ext_add_kernel"] == "loaded"


def test_a_conflicting_op_is_unusable(collide):
    assert "ext_add_kernel.add" in collide["run"]
    assert "ext-add-kernel, tf-fixture-collide" in collide["run"]
    assert "uninstall or disable" in collide["run"]


def test_strict_makes_a_collision_fatal(collide):
    assert collide["strict"] == (
        "op name conflicts: ext_add_kernel.add (ext-add-kernel, tf-fixture-collide)"
    )
    assert collide["strict_without_collide"] == "ok"
