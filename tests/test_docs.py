"""Every metric id has a row in the README's reference (its hand-computed test is generated: tests/test_metric_definitions.py)."""

from __future__ import annotations

import re
from pathlib import Path

from analysis_lib.core import registry

ROOT = Path(__file__).resolve().parents[1]


def test_every_metric_is_documented():
    readme = ROOT.joinpath("README.md").read_text()
    table = readme.split("## Metric reference", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z_]+)`", table))
    missing_docs = [m for m in registry.METRICS if m not in documented]
    assert not missing_docs, f"metrics without a README row: {missing_docs}"


def test_notebook_pairs_and_their_sync_are_documented():
    # Where notebooks are described, the reader learns that each has a .py pair and how to sync them.
    assert "\nnotebooks-sync: " in ROOT.joinpath("Makefile").read_text()
    for doc in ("README.md", "tests/README.md", "docs/notebooks.md"):
        text = ROOT.joinpath(doc).read_text()
        assert "make notebooks-sync" in text and "py:percent" in text, f"{doc} does not describe the notebook pairs"
