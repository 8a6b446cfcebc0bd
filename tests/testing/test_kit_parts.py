"""The kit's parts in-process: OpSpec numerics, output rules, poison, PTX parameters, the
recording raw session, compile_only, case outcomes, runtime names and copy hints."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_host as tf
from tenferro_host.compile_only import arg_desc, compile_only
from tenferro_host.cpu import CpuRuntime
from tenferro_host.testing import check_op, poison_fresh_memory
from tenferro_host.testing.checks import expected_outputs, output_problem
from tenferro_host.testing.conformance import Case, cases, run_cases
from tenferro_host.testing.ptx import parse_entries
from tenferro_host.testing.recording import RecordedModule, RecordingRawSession

nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (the cuda extra) is missing")


def spec(name="kit.op", variants=None, reference=lambda x: x * 2, **kw):
    kw.setdefault("signature", tf.Signature(inputs=("x",)))
    return tf.OpSpec(name=name, reference=reference, variants=variants or {}, **kw)


def register(host, *specs):
    view = host.registry.staging("kit-parts")
    for s in specs:
        view.add_op(s)
    view.commit()


def double(ex, x):
    if x.dtype is not tf.float32:
        raise tf.DTypeError(f"{x.dtype.name} is not supported; use float32", argument="x")
    out = ex.runtime.empty(x.dtype, x.shape)
    if out.numel:
        np.multiply(CpuRuntime.strided_view(x), 2, out=CpuRuntime.strided_view(out))
    return out


# -- OpSpec ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"signature": None}, "needs signature=Signature"),
        ({"variants": {"cpu": 3}}, "variants must map variant kinds to callables"),
        ({"rtol": -1.0}, "rtol must be a number >= 0"),
        ({"atol": "big"}, "atol must be a number >= 0"),
        ({"rtol": {"float33": 1e-3}}, "rtol names 'float33', which is not a dtype"),
        ({"rtol": {"float32": None}}, "rtol must be a number >= 0"),
    ],
)
def test_opspec_rejects_what_it_cannot_use(kwargs, match):
    with pytest.raises(tf.ValidationError, match=match):
        spec(**kwargs)


def test_declared_tolerances_decide_check_op(host):
    def off(ex, x):
        out = double(ex, x)
        if out.numel:
            CpuRuntime.strided_view(out)[...] *= np.float32(1 + 1e-4)
        return out

    register(
        host,
        spec("kit.strict", {"cpu": off}),
        spec("kit.loose", {"cpu": off}, rtol={"float32": 1e-3}),
    )
    with pytest.raises(AssertionError, match="rtol=1e-05"):
        check_op(host, "kit.strict", "cpu", shape=50)
    check_op(host, "kit.loose", "cpu", shape=50)
    check_op(host, "kit.strict", "cpu", shape=50, rtol=1e-3)  # an explicit value wins


# -- output rules ----------------------------------------------------------------------------
def test_output_rules_callables_and_problems(host):
    s = spec(
        signature=tf.Signature(
            inputs=("x",),
            outputs=("total", "count"),
            dtype_rule=lambda d: (d, "int64"),
            shape_rule=lambda s: ((), ()),
        )
    )
    cpu = host.backend("cpu")
    x = cpu.zeros("float32", (4,))
    assert expected_outputs(s, [x]) == [(tf.float32, ()), (tf.int64, ())]
    good = (cpu.zeros("float32", ()), cpu.zeros("int64", ()))
    assert output_problem(s, "cpu", cpu, [x], good) is None
    assert "returned 1 outputs; it declares 2 (total, count)" in output_problem(
        s, "cpu", cpu, [x], good[0]
    )
    wrong_shape = (cpu.zeros("float32", (1,)), good[1])
    assert "with shape (1,); its shape_rule says ()" in output_problem(
        s, "cpu", cpu, [x], wrong_shape
    )


# -- poison ----------------------------------------------------------------------------------
def test_poison_fills_fresh_cpu_memory_only_meanwhile(host):
    cpu = host.backend("cpu")
    with poison_fresh_memory():
        assert np.isnan(cpu.empty("float32", (3,)).download()).all()
        assert (cpu.empty("int32", (2,)).download().view(np.uint32) == 0xA5A5A5A5).all()
        with cpu.session() as s, tf.cpu.exec_session(s).jit("kit") as js:
            assert np.isnan(js.alloc_output("float64", (2,)).download()).all()
        assert cpu.zeros("float32", (2,)).download().tolist() == [0, 0]
    with poison_fresh_memory(False):
        assert not tf.cpu.CpuRuntime.poison_fresh_memory


# -- PTX parameters --------------------------------------------------------------------------
def test_ptx_parser_reads_nvrtc_output_and_refuses_what_it_cannot_read():
    from tenferro_host.testing.recording import compile_ptx

    ptx = compile_ptx('extern "C" __global__ void k(double* a, short s, char c, long long n) {}')
    assert [p.nbytes for p in parse_entries(ptx)["k"]] == [8, 2, 1, 8]
    with pytest.raises(tf.ValidationError, match=r"cannot read parameter '.param .q9 x'"):
        parse_entries(".entry bad(.param .q9 x)")


# -- the recording raw session ---------------------------------------------------------------
def test_recording_raw_session_types_its_errors(host):
    from tenferro_host.cuda import raw

    cpu = host.backend("cpu")
    module = RecordedModule(parse_entries(".entry k(.param .u64 a, .param .u32 n)"), "test PTX")
    with RecordingRawSession(cpu, "kit.op", lambda: module) as rs:
        t = cpu.zeros("float32", (4, 3))
        with pytest.raises(tf.InvalidLayoutError, match="use tensor_strided"):
            rs.tensor(t.T)
        assert rs.tensor_strided(t.T).readonly
        with pytest.raises(tf.SymbolLookupError, match="no kernel 'nope' in test PTX"):
            module.function("nope")
        k = rs.load_cubin(b"\0").function("k")
        config = raw.LaunchConfig.flat(12, 32)
        with pytest.raises(tf.ArgumentMismatchError, match="launch argument #1 is a int"):
            rs.launch(k, config, [rs.tensor(t), 12])
        with pytest.raises(tf.ArgumentMismatchError, match=r"takes 2 .* of \[8, 4\] bytes"):
            rs.launch(k, config, [rs.tensor(t), raw.i64(12)])
        rs.launch(k, config, [rs.tensor_mut(t), raw.u32(12)])
        assert [launch.arg_bytes for launch in rs.launches] == [(8, 4)]
        ro = np.zeros(4, np.float32)
        ro.setflags(write=False)
        borrowed = cpu.from_dlpack(ro)
        for mut in (rs.tensor_mut, rs.tensor_strided_mut):
            with pytest.raises(
                tf.ValidationError, match="borrows it for writing, but that tensor is read-only"
            ):
                mut(borrowed)
        assert rs.tensor(borrowed).readonly  # the shared borrow it allows
    with pytest.raises(tf.SessionClosedError):
        rs.alloc_output("float32", (1,))


# -- compile_only ----------------------------------------------------------------------------
def test_compile_only_for_cuda_and_wgsl_and_its_errors():
    from ext_add_kernel.dsl import add_kernel

    cubin = compile_only(add_kernel, "cuda", ["float32[1]"] * 3)
    assert (cubin.image_kind, cubin.arch) == ("cubin", "sm_90") and cubin.image
    ptx = compile_only(add_kernel, "cuda", ["float64[1]"] * 3, arch="compute_80")
    assert ptx.image_kind == "ptx" and b".entry" in ptx.image
    assert "f16" in compile_only(add_kernel, "wgsl", ["float16[1]"] * 3).source
    with pytest.raises(
        tf.ValidationError,
        match=r"target 'metal' is not one of the registered compile targets \(cuda, wgsl\)",
    ):
        compile_only(add_kernel, "metal", [])
    with pytest.raises(tf.ValidationError, match=r"needs a @K.kernel function"):
        compile_only(len, "cuda", [])
    with pytest.raises(tf.ValidationError, match="must be a sequence"):
        compile_only(add_kernel, "cuda", "float32[1]")
    with pytest.raises(tf.ValidationError, match="signature entry 3"):
        arg_desc(3)
    with pytest.raises(tf.DTypeError):
        compile_only(add_kernel, "wgsl", ["float32[1]", "float32[1]", "int32[1]"])


# -- cases -----------------------------------------------------------------------------------
def test_case_outcomes_classify_without_raising(host):
    def exits():
        raise SystemExit(4)

    outcome = Case("kit.op", "values", "cpu", "cpu", exits).run()
    assert (outcome.status, outcome.message) == ("error", "raised SystemExit: 4")
    skipped = Case("kit.op", "values", "cpu", "cuda", exits, unavailable="no driver").run()
    assert (skipped.status, skipped.message) == ("skipped", "no driver")
    register(host, spec("kit.double", {"cpu": double}))
    statuses = {o.case.check: o.status for o in run_cases(cases(host, "kit.double"))}
    assert statuses == dict.fromkeys(("values", "views", "inputs", "sessions"), "passed")


def test_cases_narrow_by_backend_variant_and_compile_only(host):
    register(host, spec("kit.double", {"cpu": double}))
    assert cases(host, "kit.double", backends=["webgpu"]) == []
    assert cases(host, "kit.double", variants=["dsl"]) == []
    assert cases(host, "kit.double", compile_only=True) == []


# -- names and hints -------------------------------------------------------------------------
def test_runtimes_of_one_device_have_distinct_names_in_errors(host):
    first, second = host.backend("cpu"), host.new_backend("cpu")
    assert (first.name, second.name, host.new_backend("cpu:0").name) == (
        "cpu:0",
        "cpu:0#2",
        "cpu:0#3",
    )
    register(host, spec("kit.double", {"cpu": double}))
    x = second.upload(np.ones(2, np.float32))
    with pytest.raises(tf.ForeignRuntimeError, match="lives on 'cpu:0#2', the session runs on"):
        host.run("kit.double", x, backend="cpu")


def test_copy_hint_names_only_what_the_backend_has(host):
    from tenferro_host.provider._residency import require_resident

    other = host.new_backend("cpu")
    with pytest.raises(tf.ForeignRuntimeError) as info:
        require_resident(host.backend("cpu"), other.zeros("float32", (1,)), argument="x", op=None)
    assert "copy_from_same_device" not in str(info.value)
    assert "'cpu:0'.upload(t.download())" in str(info.value)


def test_mesa_probe_noise_stays_out_of_the_users_stderr(subproc):
    import subprocess
    import sys

    env = {k: v for k, v in subproc.env().items() if k != "XDG_RUNTIME_DIR"}
    code = (
        "import os, tenferro_host as tf\n"
        "h = tf.Host(); s = h.backend_status('webgpu')\n"
        "if s.available: h.backend('webgpu').zeros('float32', (2,)).download()\n"
        "print(s.available, os.environ.get('XDG_RUNTIME_DIR'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.split()[1] == "None"  # the private directory was only for the probe


def test_a_reference_that_refuses_everything_fails_instead_of_passing(host):
    def broken_reference(x):
        raise KeyError("oops")

    register(host, spec("kit.badref", {"cpu": double}, reference=broken_reference))
    outcomes = {o.case.check: o for o in run_cases(cases(host, "kit.badref"))}
    assert outcomes["values"].status == "failed"
    assert "the reference of op 'kit.badref' refused every input" in outcomes["values"].message
    assert "KeyError: 'oops'" in outcomes["values"].message
    assert outcomes["views"].status == "skipped"


def test_a_backend_refusing_every_input_is_a_skip_with_its_reason(host):
    def refuses(ex, x):
        raise tf.UnsupportedError("not here", backend="cpu", feature="x")

    register(host, spec("kit.refuses", {"cpu": refuses}))
    (values,) = [o for o in run_cases(cases(host, "kit.refuses")) if o.case.check == "values"]
    assert values.status == "skipped" and "refused every input" in values.message


def test_cases_pass_attributes_to_the_op_and_its_reference(host):
    def scale(ex, x, factor):
        out = double(ex, x)
        if out.numel:
            CpuRuntime.strided_view(out)[...] *= np.float32(factor / 2)
        return out

    sig = tf.Signature(inputs=("x",), attributes={"factor": float})
    register(host, spec("kit.scale", {"cpu": scale}, lambda x, factor: x * factor, signature=sig))
    with_attrs = run_cases(cases(host, "kit.scale", attrs={"factor": 3.0}))
    assert {o.status for o in with_attrs} == {"passed"}
    without = {o.case.check: o for o in run_cases(cases(host, "kit.scale"))}
    assert without["values"].status == "failed"  # the reference refuses every call
    assert "missing 1 required positional argument: 'factor'" in without["values"].message


def test_loading_the_pytest_plugin_imports_no_gpu_library_and_discovers_nothing(subproc):
    loaded = subproc.json(
        "import json, sys\n"
        "import tenferro_host.testing.pytest_plugin\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('cuda', 'wgpu', 'tenferro_host_cuda', 'tenferro_host_webgpu', 'tenferro_host_cuda_jit',"
        " 'ext_add_kernel', 'rich'))))"
    )
    assert loaded == []
