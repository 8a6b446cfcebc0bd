# DSL annotations (K.Array[K.F]) are not Python types: mypy checks the rest of the module.
# mypy: disable-error-code="valid-type,attr-defined,index,no-untyped-def"
"""``@K.autotune`` on the interpreter: a clock the tests control decides the winner; the
interpreter's own rule (no clock: the first config), freezing, the learned and shipped tables,
bad configs, tuning on copies, the capture refusal. On a GPU stand-in with a virtual clock: what
the default timer times (the device, after the warm-ups, in rounds, the launch's own layout)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from support import cache_support
from support.op_registration import register_ops

import tenferro_host as tf
from tenferro_host import kernel as K
from tenferro_host.provider import _tuning_tables as tables
from tenferro_host.provider._autotuning import launch_autotuned, wall_clock

cache_dir = cache_support.cache_dir
ROOT = Path(__file__).resolve().parents[2]
X = np.arange(1, 301, dtype=np.float32)


@K.kernel
def scaled(out: K.Array[K.f32], x: K.Array[K.f32], T: K.Const[int] = 1):  # noqa: N803
    """out = x * T: the result tells which config ran."""
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = x[i] * K.f32(T)


@K.kernel
def summed(out: K.Array[K.f32], x: K.Array[K.f32], T: K.Const[int] = 1):  # noqa: N803
    """out[0] += sum(x): a second run would count x twice."""
    i = K.ABSOLUTE_POS
    if i < x.len:
        K.atomic_add(out, 0, x[i] * K.f32(T - T + 1))


CONFIGS = [K.Config({"T": t}, dim=64) for t in (1, 2, 3)]


def clock(costs: dict[int, Any], calls: list[int] | None = None) -> Callable[..., float]:
    """A timer: config T's launch takes ``costs[T]`` seconds (a list: one per call, in turn)."""
    turns: dict[int, int] = {}

    def timer(js: Any, config: K.Config, run: Callable[[], None]) -> float:
        run()
        t = config["T"]
        if calls is not None:
            calls.append(t)
        cost = costs[t]
        if isinstance(cost, list):
            turns[t] = turns.get(t, -1) + 1
            return float(cost[turns[t]])
        return float(cost)

    return timer


def never(js: Any, config: K.Config, run: Callable[[], None]) -> float:
    raise AssertionError("tuned although it must not time")


@pytest.fixture
def cpu() -> Any:
    return tf.Host().backend("cpu")


def launch(rt: Any, tuned: K.Autotuned, x: np.ndarray = X, kernel_out: str = "scaled") -> Any:
    with rt.session() as s, s.exec_session().jit("test.autotune") as js:
        out = rt.upload(np.zeros(x.size if kernel_out == "scaled" else 1, np.float32))
        js.launch(tuned, lambda config: -(-x.size // config.dim[0]), None, out, rt.upload(x))
    return out.download()


def only_choice(tuned: K.Autotuned) -> K.Choice:
    (choice,) = tuned.choices().values()
    return choice


# -- tuning ---------------------------------------------------------------------------------------
def test_the_config_the_clock_finds_fastest_runs(cpu: Any) -> None:
    calls: list[int] = []
    tuned = K.autotune(CONFIGS, key=["x"], timer=clock({1: 3e-3, 2: 1e-3, 3: 2e-3}, calls))(scaled)
    np.testing.assert_array_equal(launch(cpu, tuned), X * 2)
    choice = only_choice(tuned)
    assert (choice.index, choice.source, choice.timings) == (1, "tuned", (3e-3, 1e-3, 2e-3))
    assert calls == [1, 2, 3] * 5  # repeats=5 rounds, one timed launch per config each
    np.testing.assert_array_equal(launch(cpu, tuned), X * 2)  # the memo: no second tuning
    assert len(calls) == 15


def test_a_tie_goes_to_the_earlier_config_and_the_median_decides(cpu: Any) -> None:
    tie = K.autotune(CONFIGS, key=["x"], timer=clock({1: 2e-3, 2: 1e-3, 3: 1e-3}))(scaled)
    np.testing.assert_array_equal(launch(cpu, tie), X * 2)
    outlier = {1: [9, 1, 1, 1, 1], 2: [2, 2, 2, 2, 2], 3: [1, 9, 9, 1, 9]}
    median = K.autotune(CONFIGS, key=["x"], timer=clock(outlier))(scaled)
    np.testing.assert_array_equal(launch(cpu, median, X[:50]), X[:50])  # another key
    assert only_choice(median).timings == (1.0, 2.0, 9.0)


def test_each_key_value_is_tuned_once(cpu: Any) -> None:
    calls: list[int] = []
    tuned = K.autotune(CONFIGS, key=["x"], timer=clock({1: 1, 2: 2, 3: 3}, calls))(scaled)
    launch(cpu, tuned)
    launch(cpu, tuned, X[:100])
    launch(cpu, tuned, X[:100])
    assert len(calls) == 30
    assert sorted(json.loads(k)["x"] for _, k in tuned.choices()) == [
        "float32[100]",
        "float32[300]",
    ]


def test_tuning_runs_on_copies_so_an_accumulating_kernel_adds_once(cpu: Any) -> None:
    tuned = K.autotune(CONFIGS, key=["x"], timer=clock({1: 3, 2: 1, 3: 2}))(summed)
    np.testing.assert_array_equal(launch(cpu, tuned, kernel_out="sum"), [X.sum()])
    assert only_choice(tuned).source == "tuned"


def test_the_interpreter_without_a_clock_runs_the_first_config_and_learns_nothing(
    cpu: Any, cache_dir: Path
) -> None:
    tuned = K.autotune(CONFIGS[::-1], key=["x"])(scaled)
    np.testing.assert_array_equal(launch(cpu, tuned), X * 3)
    assert only_choice(tuned).source == "untimed"
    assert tables.learned_tables(cache_dir) == []


# -- freezing -------------------------------------------------------------------------------------
def test_frozen_never_times_and_runs_the_first_config(
    cpu: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_argument = K.autotune(CONFIGS[1:], key=["x"], timer=never, frozen=True)(scaled)
    np.testing.assert_array_equal(launch(cpu, by_argument), X * 2)
    assert only_choice(by_argument).source == "frozen"
    monkeypatch.setenv("TENFERRO_AUTOTUNE", "frozen")
    by_env = K.autotune(CONFIGS[2:], key=["x"], timer=never)(scaled)
    np.testing.assert_array_equal(launch(cpu, by_env), X * 3)
    monkeypatch.setenv("TENFERRO_AUTOTUNE", "sometimes")
    with pytest.raises(tf.ValidationError, match="TENFERRO_AUTOTUNE='sometimes'"):
        launch(cpu, K.autotune(CONFIGS, timer=never)(scaled))


def test_frozen_uses_what_was_learned(cpu: Any) -> None:
    launch(cpu, K.autotune(CONFIGS, key=["x"], timer=clock({1: 3, 2: 2, 3: 1}))(scaled))
    frozen = K.autotune(CONFIGS, key=["x"], timer=never, frozen=True)(scaled)
    np.testing.assert_array_equal(launch(cpu, frozen), X * 3)
    assert only_choice(frozen).source == "learned"


# -- the learned table: later processes -----------------------------------------------------------
PROCESS = """
import sys, numpy as np, tenferro_host as tf
from tenferro_host import kernel as K
sys.path.insert(0, {tests!r})
from kernel.test_autotune import CONFIGS, clock, launch, never, only_choice, scaled, X
costs = {{1: 3e-3, 2: 1e-3, 3: 2e-3}} if sys.argv[1] == "tune" else None
tuned = K.autotune(CONFIGS, key=["x"], timer=clock(costs) if costs else never)(scaled)
out = launch(tf.Host().backend("cpu"), tuned)
print(only_choice(tuned).source, int(out[1] / X[1]))
"""


def test_a_winner_is_read_by_later_processes_without_timing(tmp_path: Path) -> None:
    script = tmp_path / "proc.py"
    script.write_text(PROCESS.format(tests=str(ROOT / "tests")))

    def run(mode: str) -> str:
        done = subprocess.run(
            [sys.executable, str(script), mode], capture_output=True, text=True, cwd=ROOT
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run("tune") == "tuned 2"
    assert run("read") == "learned 2"  # a timer that fails the process if it is called


# -- shipped tables -------------------------------------------------------------------------------
def write_table(path: Path, entries: list[dict[str, Any]], kernel: str = "scaled") -> Path:
    path.write_text(json.dumps({"format": 1, "kernels": {kernel: entries}}))
    return path


def entry(t: int, device: dict[str, str] | None = None, **key: str) -> dict[str, Any]:
    return {"device": device or {}, "key": key, "config": {"constants": {"T": t}, "dim": [64]}}


def test_a_shipped_table_is_used_before_tuning(cpu: Any, tmp_path: Path) -> None:
    table = write_table(
        tmp_path / "t.autotune.json",
        [
            entry(1, {"target": "webgpu"}),
            entry(2, {"target": "cpu"}),
            entry(3, {"target": "cpu"}, x="float32[300]"),  # more fields: it wins for 300
            entry(1, {"target": "cpu"}, x="float32[300]"),  # the earlier of a tie wins
        ],
    )
    tuned = K.autotune(CONFIGS, key=["x"], table=table, timer=never)(scaled)
    np.testing.assert_array_equal(launch(cpu, tuned), X * 3)
    np.testing.assert_array_equal(launch(cpu, tuned, X[:10]), X[:10] * 2)
    assert {c.source for c in tuned.choices().values()} == {"shipped"}
    assert table in tables.SHIPPED_SEEN


def test_a_learned_winner_comes_before_the_shipped_table(cpu: Any, tmp_path: Path) -> None:
    launch(cpu, K.autotune(CONFIGS, key=["x"], timer=clock({1: 3, 2: 2, 3: 1}))(scaled))
    table = write_table(tmp_path / "t.autotune.json", [entry(1, {"target": "cpu"})])
    tuned = K.autotune(CONFIGS, key=["x"], table=table, timer=never)(scaled)
    np.testing.assert_array_equal(launch(cpu, tuned), X * 3)
    assert only_choice(tuned).source == "learned"


def test_the_default_clock_times_every_config(cpu: Any) -> None:
    tuned = K.autotune(CONFIGS, key=["x"], timer=wall_clock, repeats=2)(scaled)
    out = launch(cpu, tuned)
    choice = only_choice(tuned)
    np.testing.assert_array_equal(out, X * (choice.index + 1))
    assert choice.source == "tuned" and all(t is not None and t > 0 for t in choice.timings)


def test_a_table_next_to_the_kernel_module_is_found(cpu: Any, tmp_path: Path) -> None:
    module = tmp_path / "shipped_kernel.py"
    module.write_text(
        textwrap.dedent(
            """
            from tenferro_host import kernel as K

            @K.autotune([K.Config({"T": 1}, dim=64), K.Config({"T": 5}, dim=64)], key=["x"])
            @K.kernel
            def scaled(out: K.Array[K.f32], x: K.Array[K.f32], T: K.Const[int] = 1):
                i = K.ABSOLUTE_POS
                if i < out.len:
                    out[i] = x[i] * K.f32(T)
            """
        )
    )
    write_table(tmp_path / "shipped_kernel.autotune.json", [entry(5)])
    sys.path.insert(0, str(tmp_path))
    try:
        import shipped_kernel  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    np.testing.assert_array_equal(launch(cpu, shipped_kernel.scaled), X * 5)


def test_a_table_that_cannot_be_used_is_a_typed_error(cpu: Any, tmp_path: Path) -> None:
    with pytest.raises(tf.ValidationError, match="does not exist"):
        K.autotune(CONFIGS, table=tmp_path / "missing.json")(scaled)
    unknown = write_table(tmp_path / "u.json", [entry(7)])
    with pytest.raises(tf.ValidationError, match="none of its configs"):
        launch(cpu, K.autotune(CONFIGS, key=["x"], table=unknown)(scaled))
    for text, why in (
        ("{", "not readable JSON"),
        ('{"format": 2}', '"format": 1'),
        ('{"format": 1, "kernels": {"scaled": [{"key": {}}]}}', '"config" object'),
        ('{"format": 1, "kernels": {"scaled": [{"config": {}, "key": {"x": 1}}]}}', "strings"),
    ):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(tf.ValidationError, match=why):
            launch(cpu, K.autotune(CONFIGS, key=["x"], table=bad)(scaled))


def test_a_table_config_takes_what_k_config_takes_and_names_a_wrong_field(
    cpu: Any, tmp_path: Path
) -> None:
    """K.Config reads the table's configs: "dim": 64 is [64], as K.Config(dim=64) is (64,); a
    wrong field is a ValidationError naming the file, the kernel and the field, like K.Config's
    own error for it."""
    table = write_table(tmp_path / "int.json", [{"config": {"constants": {"T": 3}, "dim": 64}}])
    tuned = K.autotune(CONFIGS, key=["x"], table=table, timer=never)(scaled)
    np.testing.assert_array_equal(launch(cpu, tuned), X * 3)
    assert only_choice(tuned).source == "shipped"
    for i, (config, field) in enumerate(
        [
            ({"constants": [1, 2], "dim": [64]}, "constants"),
            ({"constants": {"T": 3}, "dim": [64, "a"]}, "dim"),
            ({"constants": {"T": 3}, "dim": 6.4}, "dim"),
            ({"constants": {"T": 3}, "dim": [1, 1, 1, 64]}, "dim"),
        ]
    ):
        with pytest.raises(tf.ValidationError) as own:
            K.Config(config["constants"], dim=config["dim"])
        assert own.value.argument == field
        bad = write_table(tmp_path / f"bad{i}.json", [{"config": config}])
        with pytest.raises(tf.ValidationError) as info:
            launch(cpu, K.autotune(CONFIGS, key=["x"], table=bad)(scaled))
        message = str(info.value)
        assert str(bad) in message and "kernel 'scaled'" in message, message
        assert f"has a wrong {field!r}: {own.value.message}" in message
    typo = write_table(tmp_path / "typo.json", [{"config": {"constants": {"T": 3}, "dims": 64}}])
    with pytest.raises(tf.ValidationError, match="has 'dims'; a config has only"):
        launch(cpu, K.autotune(CONFIGS, key=["x"], table=typo)(scaled))


# -- bad configs ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "configs,key,why",
    [
        ([], [], "has no configs"),
        ([{"T": 1}], [], "not a K.Config"),
        ([K.Config({"TILE": 4})], [], "'TILE', which is not one of its compile-time constants"),
        ([K.Config({"T": 1}), K.Config({"T": 1})], [], "repeats an earlier one"),
        (CONFIGS, ["y"], "'y' is not a parameter"),
        (CONFIGS, ["T"], "is set by the configs"),
    ],
)
def test_bad_configs_and_keys_are_refused_at_decoration(configs: Any, key: Any, why: str) -> None:
    with pytest.raises(tf.ValidationError, match=why):
        K.autotune(configs, key=key)(scaled)


def test_bad_launches_of_an_autotuned_kernel(cpu: Any) -> None:
    with pytest.raises(tf.ValidationError, match="chosen by autotuning"):
        with cpu.session() as s, s.exec_session().jit("t") as js:
            out = js.alloc_output("float32", (4,))
            js.launch(K.autotune(CONFIGS)(scaled), 1, None, out, out, T=2)
    with pytest.raises(tf.InvalidLaunchConfigError, match="has no dim"):
        with cpu.session() as s, s.exec_session().jit("t") as js:
            out = js.alloc_output("float32", (4,))
            js.launch(K.autotune([K.Config({"T": 1})])(scaled), 1, None, out, out)
    with pytest.raises(tf.InvalidLaunchConfigError, match="positive ints"):
        K.Config({"T": 1}, dim=0)
    with pytest.raises(tf.ValidationError, match="repeats must be an int >= 1"):
        K.autotune(CONFIGS, repeats=0)(scaled)


def test_a_config_that_cannot_run_is_skipped_and_named(cpu: Any) -> None:
    configs = [K.Config({"T": 1}, dim=2048), *CONFIGS[1:]]  # 2048 units: more than a cube holds
    tuned = K.autotune(configs, key=["x"], timer=clock({2: 2, 3: 1}))(scaled)
    with pytest.warns(K.AutotuneWarning, match=r"config 0 .*2048.*InvalidLaunchConfigError"):
        np.testing.assert_array_equal(launch(cpu, tuned), X * 3)
    choice = only_choice(tuned)
    assert choice.timings == (None, 2.0, 1.0) and choice.skipped[0][0] == 0
    none_run = K.autotune([K.Config({"T": t}, dim=4096) for t in (1, 2)], timer=never)(scaled)
    with pytest.raises(tf.UnsupportedError, match="no config of kernel 'scaled' runs") as info:
        launch(cpu, none_run)
    assert "config 1" in str(info.value)


# -- capture --------------------------------------------------------------------------------------
CAPTURED = "test.autotune.captured"


def test_a_capture_never_tunes_it_names_the_warm_up(cpu: Any) -> None:
    host = cpu.host
    tuned = K.autotune(CONFIGS, key=["x"], timer=clock({1: 3, 2: 1, 3: 2}))(scaled)

    def variant(ex: Any, x: tf.Tensor) -> tf.Tensor:
        with ex.jit(CAPTURED) as js:
            out = js.alloc_output(x.dtype, x.shape)
            js.launch(tuned, lambda config: -(-x.numel // config.dim[0]), None, out, x)
        return out

    register_ops(host, "autotune-capture-test", "dsl", {CAPTURED: variant})
    x = cpu.upload(X)
    with cpu.session() as s:
        ex = s.exec_session()
        with pytest.raises(tf.CaptureError, match="warm-up") as info, ex.capture():
            ex.run(CAPTURED, x)
        assert "TENFERRO_AUTOTUNE=frozen" in str(info.value)
    assert tuned.choices() == {}  # nothing was timed
    np.testing.assert_array_equal(host.run(CAPTURED, x).download(), X * 2)  # the warm-up
    with cpu.session() as s:
        ex = s.exec_session()
        with ex.capture() as cap:
            out = ex.run(CAPTURED, x)
    graph = cap.graph(inputs=(x,), outputs=(out,))
    np.testing.assert_array_equal(graph.replay(cpu.upload(X * 3)).download(), X * 6)


# -- what the default timer times: a GPU stand-in on a virtual clock ------------------------------
HOST_S = 1e-5  # the host's cost of one launch on the stand-in


class StandInDevice:
    """A GPU runtime stand-in on a virtual clock: a launch costs the host ``HOST_S`` and queues
    ``seconds(T, launches so far)`` of device work behind what is queued; ``synchronize`` waits
    the queue out. It logs launches (with their arguments), synchronizations and clock reads
    (each with whether device work was still pending)."""

    name = "stand-in"
    active_capture = None
    device_info = None

    def __init__(self, seconds: Callable[[int, int], float], cpu: Any = None) -> None:
        self.seconds = seconds
        self.cpu = cpu  # copies tensors for tuning, where a test passes them
        self.now = self.idle_at = 0.0
        self.log: list[tuple[str, Any]] = []

    def launch(self, t: int, args: tuple[Any, ...]) -> None:
        self.now += HOST_S
        work = self.seconds(t, sum(kind == "launch" for kind, _ in self.log))
        self.idle_at = max(self.now, self.idle_at) + work
        self.log.append(("launch", (t, args)))

    def synchronize(self) -> None:
        self.now = max(self.now, self.idle_at)
        self.log.append(("sync", None))

    def clock(self) -> float:
        self.log.append(("clock", self.idle_at > self.now))
        return self.now

    def canonicalize(self, t: tf.Tensor) -> tf.Tensor:
        return self.cpu.canonicalize(t)

    def launched(self) -> list[int]:
        return [what[0] for kind, what in self.log if kind == "launch"]


class StandInJit:
    """The JIT session an autotuned launch talks to, on a :class:`StandInDevice` (target
    ``cuda``: not the interpreter, so the default clock times)."""

    target = "cuda"

    def __init__(self, device: StandInDevice) -> None:
        self.runtime = device

    def launch(self, kernel: Any, count: Any, dim: Any, *args: Any, **constants: Any) -> None:
        self.runtime.launch(constants["T"], args)


def tune_on(device: StandInDevice, tuned: K.Autotuned, *args: Any) -> K.Choice:
    """Launch ``tuned`` once on ``device`` (tuning it) and return its choice."""
    launch_autotuned(tuned, StandInJit(device), 1, None, args or (0, 0), {})
    return only_choice(tuned)


def costs_ms(costs: dict[int, float]) -> Callable[[int, int], float]:
    return lambda t, _: costs[t] * 1e-3


def test_the_default_clock_reads_the_time_only_with_the_device_idle() -> None:
    """Each clock read waits for the queue: the warm-ups queued before a timed window and the
    launch inside it are neither counted nor missed; the timing is the device's."""
    device = StandInDevice(costs_ms({1: 3.0, 2: 1.0, 3: 2.0}))
    tuned = K.autotune(CONFIGS, key=["x"], timer=partial(wall_clock, clock=device.clock))(scaled)
    choice = tune_on(device, tuned)
    reads = [pending for kind, pending in device.log if kind == "clock"]
    assert len(reads) == 2 * 3 * 5 and not any(reads)  # two reads per sample, none mid-work
    assert choice.index == 1 and choice.timings == pytest.approx(
        (3e-3 + HOST_S, 1e-3 + HOST_S, 2e-3 + HOST_S)
    )
    assert device.launched()[-1] == 2  # the launch after tuning runs the winner


def test_warm_up_launches_are_not_timed_and_come_before_any_timing() -> None:
    """A config's first launch (compile, module load) costs a second here: no median shows it,
    and every config is warmed up before the first clock read, so no compile's gap falls
    between two configs' timings."""
    device = StandInDevice(lambda t, n: 1.0 if n % 2 == 0 and n < 6 else t * 1e-3)
    tuned = K.autotune(CONFIGS, key=["x"], timer=partial(wall_clock, clock=device.clock))(scaled)
    choice = tune_on(device, tuned)
    assert choice.timings == pytest.approx((1e-3 + HOST_S, 2e-3 + HOST_S, 3e-3 + HOST_S))
    first_read = next(i for i, (kind, _) in enumerate(device.log) if kind == "clock")
    warmed = [what[0] for kind, what in device.log[:first_read] if kind == "launch"]
    assert warmed == [1, 1, 2, 2, 3, 3]  # warmup=2 launches of each config


def test_a_device_slowing_down_while_tuning_does_not_decide() -> None:
    """The device slows by 1% per launch (clocks, heat): timed in rounds, config 2, 5% faster
    at any moment, wins; timed one config after another, the later config paid the slowdown."""
    base = {1: 10.0, 2: 9.5}
    device = StandInDevice(lambda t, n: base[t] * 1e-3 * (1 + 0.01 * n))
    tuned = K.autotune(CONFIGS[:2], key=["x"], timer=partial(wall_clock, clock=device.clock))(
        scaled
    )
    assert tune_on(device, tuned).index == 1


def test_the_timed_launches_have_the_launch_s_layout_on_copies(cpu: Any) -> None:
    """Two strided views of one storage (offsets 0 and 1, stride 2): the timed launches get
    views of the same shape, strides and offsets, both into one copy (the launch's
    specialization and aliasing); the launch after tuning gets the arguments themselves."""
    base = cpu.upload(np.arange(600, dtype=np.float32))
    out, x = base[0::2], base[1::2]
    device = StandInDevice(costs_ms({1: 3.0, 2: 1.0, 3: 2.0}), cpu)
    tuned = K.autotune(CONFIGS, key=["x"], timer=partial(wall_clock, clock=device.clock))(scaled)
    tune_on(device, tuned, out, x)
    *timed, chosen = [what for kind, what in device.log if kind == "launch"]
    assert chosen == (2, (out, x))
    for _, (o, i) in timed:
        assert (o.shape, o.strides, o.offset, i.strides, i.offset) == ((300,), (2,), 0, (2,), 1)
        assert o.storage is i.storage and o.storage is not base.storage


# -- a learned winner holds for the code it was timed on ------------------------------------------
MODULE = """
from tenferro_host import kernel as K

@K.func
def scale(v, t):
    return v * K.f32({factor})

@K.autotune([K.Config({{"T": t}}, dim=64) for t in (1, 2, 3)], key=["x"])
@K.kernel
def edited(out: K.Array[K.f32], x: K.Array[K.f32], T: K.Const[int] = 1):
    i = K.ABSOLUTE_POS
    if i < out.len:
        out[i] = scale(x[i], T)
"""


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_winner_learned_on_other_code_is_not_reused(cpu: Any, tmp_path: Path) -> None:
    """The kernel's body is unchanged but its helper is edited: the winner learned before the
    edit was timed on other code, so it is not read (frozen: the first config); the same
    code again reads it."""
    path = tmp_path / "edited_kernel.py"
    path.write_text(MODULE.format(factor="t"))
    first = load_module(path, "edited_kernel_a").edited
    first.timer = clock({1: 3, 2: 1, 3: 2})
    launch(cpu, first)
    assert only_choice(first).source == "tuned"
    same = load_module(path, "edited_kernel_b").edited
    same.frozen = True
    launch(cpu, same)
    assert (only_choice(same).source, only_choice(same).index) == ("learned", 1)
    path.write_text(MODULE.format(factor="t + t"))
    edited = load_module(path, "edited_kernel_c").edited
    edited.frozen = True
    np.testing.assert_array_equal(launch(cpu, edited), X * 2)  # config 0: T=1, doubled
    assert only_choice(edited).source == "frozen"
