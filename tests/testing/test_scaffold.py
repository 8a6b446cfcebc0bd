"""`tenferro-host new-op`: a scaffolded package installs and its own tests pass without a GPU."""

from __future__ import annotations

import pytest
from support.pip_target import pip_install_target

from tenferro_host import ValidationError
from tenferro_host.scaffold import MAX_NAME, scaffold


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
    tests = subproc.pytest("-rs", str(root / "tests"), paths=(site,))
    summary = tests.stdout.splitlines()[-1]
    assert tests.returncode == 0 and "passed" in summary and "failed" not in summary, (
        tests.stdout + tests.stderr
    )
    check = subproc.cli("check", "tf_scaffolded", "--json", paths=(site,))
    assert check.returncode == 0, check.stdout + check.stderr
    assert subproc.run(["bash", "-n", str(root / "ci.sh")]).returncode == 0


def test_scaffold_rejects_bad_names_and_existing_directories(tmp_path):
    for bad in ("My-Ops", "1ops", "class", ""):
        with pytest.raises(ValidationError, match="is not a package name"):
            scaffold(bad, tmp_path)
    scaffold("ops_a", tmp_path)
    with pytest.raises(ValidationError, match="already exists"):
        scaffold("ops_a", tmp_path)
    with pytest.raises(ValidationError, match="is not a directory"):
        scaffold("ops_b", tmp_path / "missing")


@pytest.mark.parametrize("taken", ["tenferro_host", "numpy", "json", "pytest"])
def test_scaffold_refuses_a_name_that_would_shadow_an_installed_module(tmp_path, taken):
    with pytest.raises(ValidationError, match="taken by an installed module") as info:
        scaffold(taken, tmp_path)
    assert info.value.argument == "name" and not (tmp_path / taken).exists()


def test_scaffold_refuses_an_over_long_name_and_a_dir_it_cannot_write(tmp_path):
    with pytest.raises(ValidationError, match=f"300 characters long; use at most {MAX_NAME}"):
        scaffold("x" * 300, tmp_path)
    scaffold("y" * MAX_NAME, tmp_path)  # the longest name still writes its NAME/NAME/ paths
    with pytest.raises(ValidationError, match="cannot write the package 'ops_c'") as info:
        scaffold("ops_c", tmp_path / ("d" * 300))  # a --dir the file system cannot name
    assert info.value.argument == "dir"
