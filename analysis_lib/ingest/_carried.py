"""Small helpers shared by the importers of formats without an ATIF trajectory (TB1, Inspect, mcpbr).

These formats carry metric values directly (tokens, tool counts, test counts); the helpers turn
them into the Layer 1 metric ids of :attr:`analysis_lib.core.trial.Trial.carried_metrics`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from ..core.trial import TestResult

# Test statuses of the Layer 1 vocabulary (see analysis_lib.core.trial.TestResult).
_STATUS = {
    "passed": "passed", "pass": "passed", "success": "passed", "ok": "passed",
    "failed": "failed", "fail": "failed", "failure": "failed", "error": "failed", "errored": "failed",
    "skipped": "skipped", "skip": "skipped",
    "pending": "pending",
}


def parse_time(value: Any) -> datetime | None:
    """ISO-8601 text (``Z`` or offset) to an aware UTC datetime; naive times are taken as UTC; junk -> None."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    """``end - start`` in seconds, or None when either is missing or the interval is negative."""
    if start is None or end is None:
        return None
    sec = (end - start).total_seconds()
    return sec if sec >= 0 else None


def as_int(value: Any) -> int | None:
    """A non-negative integer count, or None for null, bools, negatives and non-numbers."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


def as_float(value: Any) -> float | None:
    """A finite float, or None for null, bools and non-numbers."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return float(value)
    return None


def test_status(value: Any) -> str:
    """Map a producer's test status onto passed | failed | skipped | pending | other."""
    return _STATUS.get(str(value).strip().lower(), "other") if value is not None else "other"


def test_counts(tests: list[TestResult]) -> dict[str, int]:
    """``tests_passed``, ``tests_failed`` and ``tests_total`` of a list of tests (total counts every test)."""
    return {
        "tests_passed": sum(t.status == "passed" for t in tests),
        "tests_failed": sum(t.status == "failed" for t in tests),
        "tests_total": len(tests),
    }


def one_line(text: Any, limit: int = 300) -> str:
    """Collapse whitespace and cut, so that a message fits one line of errors.csv."""
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."
