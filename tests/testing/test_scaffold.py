"""`tenferro-host new-op`: a scaffolded package installs and its own tests pass without a GPU."""

from __future__ import annotations

import sys

import pytest
from support.pip_target import pip_install_target

from tenferro_host import ValidationError
from tenferro_host.scaffold import scaffold


def test_a_scaffolded_package_installs_and_its_tests_pass(subproc, tmp_path):
    made = subproc.cli("new-op", "tf_scaffolded", "--dir", str(tmp_path))
    assert made.returncode == 0, made.stderr
    root = tmp_path / "tf_scaffolded"
    assert {"pyproject.toml", "setup.py", "ci.sh", "README.md", "tests"} <= {
        p.name for p in root.iterdir()
    }
    plugin = (root / "tf_scaffolded" / "plugin.py").read_text()
    assert "TENFERRO_HOST_API = (1, 0)" in plugin and "rtol=" in plugin
    site = tmp_path / "site"
    pip_install_target([root], site)
    tests = subproc.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            str(root / "tests"),
        ],
        (site,),
    )
    summary = tests.stdout.splitlines()[-1]
    assert tests.returncode == 0 and "passed" in summary and "failed" not in summary, (
        tests.stdout + tests.stderr
    )
    check = subproc.cli("check", "tf_scaffolded", "--json", paths=(site,))
    assert check.returncode == 0, check.stdout + check.stderr
    assert subproc.run(["bash", "-n", str(root / "ci.sh")]).returncode == 0


def test_scaffold_rejects_bad_names_and_existing_directories(tmp_path):
    for bad in ("My-Ops", "1ops", "class", "tenferro_host", ""):
        with pytest.raises(ValidationError, match="is not a package name"):
            scaffold(bad, tmp_path)
    scaffold("ops_a", tmp_path)
    with pytest.raises(ValidationError, match="already exists"):
        scaffold("ops_a", tmp_path)
    with pytest.raises(ValidationError, match="is not a directory"):
        scaffold("ops_b", tmp_path / "missing")
