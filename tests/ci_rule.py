"""The rule for a test that cannot run here: skip locally, fail under ``CI=true`` (CI installs every tool and reference).

``skip_or_fail_in_ci(reason)`` is the one way a test says it cannot run. The hooks below hold the rule for every other
skip too (``pytest.skip``, ``importorskip``, ``skipif``): under ``CI=true`` a skip fails unless its reason is one of the
deliberate exceptions listed in ``tests/README.md``. ``tests/conftest.py`` registers the hooks.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path
from typing import NoReturn

import pytest

README = Path(__file__).with_name("README.md")
_LIST = re.compile(r"<!-- deliberate-skips:start -->(.*?)<!-- deliberate-skips:end -->", re.S)


def in_ci() -> bool:
    """``CI=true`` in the environment: every check must run."""
    return os.environ.get("CI") == "true"


def skip_or_fail_in_ci(reason: str) -> NoReturn:
    """Skip this test with ``reason``; under ``CI=true`` fail with it instead (a check CI never runs does not exist).

    Say in ``reason`` what is missing and how to get it, e.g. ``"pdflatex not installed (apt-get install ...)"``.
    """
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@cache
def deliberate_skips(readme: Path = README) -> tuple[str, ...]:
    """The skip reasons allowed under ``CI=true``: the code-quoted text opening each item of the README's list."""
    found = _LIST.search(readme.read_text(encoding="utf-8"))
    if found is None:
        raise RuntimeError(f"{readme}: the list of deliberate skips (<!-- deliberate-skips:start --> ... end -->) is missing")
    return tuple(re.findall(r"^- `([^`]+)`", found.group(1), re.M))


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The message a skipped report carries (``Skipped: `` prefix removed)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def _enforce(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not (in_ci() and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    if any(allowed in reason for allowed in deliberate_skips()):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI=true ({reason}): CI must run every test; install what it needs in .ci/run, "
        "or list the reason in tests/README.md as a deliberate exception"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _enforce(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    _enforce(report)
    return report
