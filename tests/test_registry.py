"""The metric registry: every column has one entry, the README's reference is generated from it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from analysis_lib import registry
from analysis_lib.metrics import CATEGORY_COLUMNS, METRIC_COLUMNS

ROOT = Path(__file__).resolve().parents[1]


def test_every_metrics_column_has_one_registry_entry_and_no_entry_is_orphaned():
    assert set(registry.METRICS) == set(METRIC_COLUMNS + CATEGORY_COLUMNS)
    assert not set(registry.DERIVED) & set(registry.METRICS)  # derived quantities are named apart
    for m in list(registry.METRICS.values()) + list(registry.DERIVED.values()):
        assert m.label and m.definition, m.id
        assert m.scale in ("ratio", "difference", "rate", "none")
    assert registry.metric("mcp_calls__codegraph__search_code").exploratory_only
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        registry.metric("nope")


def test_pass_rate_and_resolve_rate_are_different_quantities_with_different_labels():
    assert registry.DERIVED["pass_rate"].label != registry.DERIVED["resolve_rate"].label
    assert "trial" in registry.DERIVED["pass_rate"].label and "majority" in registry.DERIVED["resolve_rate"].label


def test_readme_metric_reference_is_the_registry_table():
    sys.path.insert(0, str(ROOT / "tools"))
    from metric_reference import rendered

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert rendered(readme) == readme, "README.md is stale: run `python tools/metric_reference.py`"
