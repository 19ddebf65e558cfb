"""The suite's rule for checks that cannot run here: skip locally, fail under CI=true (tests/ci_rule.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree

import pytest
from ci_rule import README, deliberate_skips, skip_or_fail_in_ci

TESTS = Path(__file__).resolve().parent

SAMPLE = '''
import pytest
from ci_rule import skip_or_fail_in_ci

def test_helper():
    skip_or_fail_in_ci("the widget tool is not installed")

def test_plain_skip():
    pytest.skip("no widget here")

def test_importorskip():
    pytest.importorskip("no_such_module_for_the_ci_rule")

@pytest.mark.skipif(True, reason="the dying worker is set up by fork")
def test_deliberate():
    pass

@pytest.mark.xfail(reason="a known failure is not a skip", strict=True)
def test_xfail():
    assert False

def test_runs():
    pass
'''


def _run_sample(folder: Path, ci: bool) -> dict[str, str]:
    """The outcome of each test of SAMPLE, and of a module skipped at import, under the project's hooks (JUnit XML)."""
    folder.mkdir()
    (folder / "conftest.py").write_text("from ci_rule import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n")
    (folder / "test_sample.py").write_text(SAMPLE)
    (folder / "test_module_skip.py").write_text('import pytest\npytest.importorskip("no_such_module_at_import")\n')
    env = {"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin", **({"CI": "true"} if ci else {})}
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "--continue-on-collection-errors",
                    "--junitxml", "report.xml", "."],
                   cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    outcomes = {}
    for case in ElementTree.parse(folder / "report.xml").getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        name = case.get("name") or case.get("classname")
        skipped = case.find("skipped")
        if kinds == ["skipped"] and skipped is not None and skipped.get("type") == "pytest.xfail":
            kinds = ["xfail"]
        outcomes[name] = kinds[0] if kinds else "passed"
    return outcomes


def test_the_helper_skips_locally_and_fails_under_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="pdflatex not installed"):
        skip_or_fail_in_ci("pdflatex not installed")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true but pdflatex not installed"):
        skip_or_fail_in_ci("pdflatex not installed")


@pytest.mark.slow  # two pytest subprocesses
def test_under_ci_every_skip_fails_unless_the_readme_lists_it(tmp_path):
    local = {"test_helper": "skipped", "test_plain_skip": "skipped", "test_importorskip": "skipped",
             "test_deliberate": "skipped", "test_xfail": "xfail", "test_runs": "passed", "test_module_skip": "skipped"}
    assert _run_sample(tmp_path / "local", ci=False) == local
    # Under CI=true the helper fails with its reason, and every other skip fails unless tests/README.md lists its reason.
    ci = local | {"test_helper": "failure", "test_plain_skip": "failure", "test_importorskip": "failure", "test_module_skip": "error"}
    assert _run_sample(tmp_path / "ci", ci=True) == ci
    report = (tmp_path / "ci" / "report.xml").read_text()
    assert "CI=true but the widget tool is not installed" in report
    assert "skipped under CI=true (no widget here)" in report


def test_the_deliberate_skips_are_listed_and_each_is_used():
    reasons = deliberate_skips(README)
    assert reasons, "tests/README.md lists no deliberate skip"
    sources = "\n".join(p.read_text() for p in TESTS.glob("test_*.py") if p.name != "test_ci_rule.py")
    for reason in reasons:
        assert reason in sources, f"tests/README.md lists the deliberate skip {reason!r}, which no test uses"


def test_no_test_skips_except_through_the_helper_or_a_listed_reason():
    """One rule, one helper: pytest.skip, importorskip and skip markers appear only with a reason the README lists."""
    reasons = deliberate_skips(README)
    found = []
    for path in sorted(TESTS.glob("*.py")):
        if path.name in ("ci_rule.py", "test_ci_rule.py"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"pytest\.skip\(|importorskip\(|mark\.skip(if)?\b", line) and not any(r in line for r in reasons):
                found.append(f"{path.name}:{number}: {line.strip()}")
    assert found == [], "skips outside skip_or_fail_in_ci:\n" + textwrap.indent("\n".join(found), "  ")
