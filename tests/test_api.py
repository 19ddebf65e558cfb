"""The public API of ``analysis_lib``: what it exports, that its examples run, that importing it is cheap."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import analysis_lib

ROOT = Path(__file__).resolve().parents[1]


def _run_doctests(obj, name: str) -> doctest.TestResults:
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    for test in doctest.DocTestFinder(recurse=False).find(obj, name, globs={}):
        runner.run(test)
    return runner.summarize(verbose=False)


def test_the_package_examples_run(monkeypatch):
    monkeypatch.chdir(ROOT)  # load_plan() reads params/analysis_plan.yaml of the project
    res = _run_doctests(analysis_lib, "analysis_lib")
    assert res.attempted >= 5 and res.failed == 0


@pytest.mark.parametrize("name", analysis_lib.__all__)
def test_every_exported_name_resolves_to_its_definition(name):
    value = getattr(analysis_lib, name)
    module = importlib.import_module(analysis_lib._API[name])
    assert value is getattr(module, name)
    assert value.__module__ == module.__name__, f"{name} is defined in {value.__module__}, exported from {module.__name__}"
    assert (value.__doc__ or "").strip(), f"{name} has no docstring"
    assert name in dir(analysis_lib)
    res = _run_doctests(value, name)
    assert res.failed == 0


def test_all_lists_every_loaded_name():
    assert sorted(analysis_lib.__all__) == sorted(analysis_lib._API)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'load_runs'"):
        analysis_lib.load_runs  # noqa: B018


def test_importing_the_package_loads_no_heavy_library():
    code = "import sys, analysis_lib; print(sorted(m for m in ('pandas', 'scipy', 'litellm', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


def test_notebooks_and_readme_import_only_names_that_exist():
    """Every ``from analysis_lib import a, b`` in the notebooks' sources and the docs names something exported."""
    sources = [*ROOT.glob("notebooks/*.py"), ROOT / "README.md", *ROOT.glob("docs/*.md")]
    seen = 0
    for path in sources:
        for names in re.findall(r"from analysis_lib import ([\w ,]+)", path.read_text(encoding="utf-8")):
            for name in (n.strip() for n in names.split(",")):
                seen += 1
                exported = name in analysis_lib.__all__ or importlib.util.find_spec(f"analysis_lib.{name}") is not None
                assert exported, f"{path.relative_to(ROOT)}: analysis_lib exports no {name}"
    assert seen, "no `from analysis_lib import ...` found: the pattern no longer matches the sources"


@pytest.mark.slow  # builds the wheel in pip's isolated build environment (about 10 s)
def test_the_wheel_ships_py_typed_and_the_prompts(tmp_path):
    """The package says it is typed (PEP 561): the built wheel must carry the marker, beside the prompt files."""
    import shutil
    import zipfile

    src = tmp_path / "src"  # setuptools writes build/ and *.egg-info beside the sources: a copy keeps the checkout clean
    shutil.copytree(ROOT / "analysis_lib", src / "analysis_lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("agent_ab_analytics-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "analysis_lib/py.typed" in names
    assert any(n.startswith("analysis_lib/judge/prompts/") and n.endswith(".md") for n in names)


def test_the_command_line_loads_scipy_stats_and_plotting_only_where_it_compares():
    """Listing trials, estimating cost or Layer 1 alone never pay for scipy's statistics or matplotlib."""
    code = ("import sys, analysis_lib.cli.main, analysis_lib.cli.analyse; "
            "print(sorted(m for m in ('scipy.stats', 'matplotlib', 'litellm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"
