"""The runnable examples in ``analysis_lib.stats``: every public procedure has one, each quoting the value of an
external reference (R's documented example, statsmodels, scipy, a textbook table) beside the call, and each runs
here as a doctest."""

from __future__ import annotations

import doctest
import sys

import pytest

from analysis_lib import stats

FINDER = doctest.DocTestFinder()


def _example(name: str) -> doctest.DocTest:
    obj = getattr(stats, name)
    found = [t for t in FINDER.find(obj, name, globs=vars(sys.modules[obj.__module__]).copy()) if t.examples]
    assert found, f"stats.{name} has no runnable example in its docstring"
    return found[0]


@pytest.mark.parametrize("name", stats.__all__)
def test_public_statistics_function_has_a_runnable_example_that_holds(name):
    test = _example(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=lambda text: pytest.fail(f"stats.{name}: its example no longer holds:\n{text}"))
    assert runner.summarize(verbose=False).attempted == len(test.examples)
