"""CTRF test reports (``verifier/ctrf.json``), parsed leniently.

Real Harbor verifiers (pytest-json-ctrf) write no ``reportFormat``/``specVersion``, float
seconds instead of integer milliseconds and snake_case ``file_path``; the spec writes ms and
``filePath``. Durations are normalised to seconds: a report with ``specVersion`` or
``reportFormat`` is in ms, else the summary's ``start`` magnitude decides (~1.7e12 = ms).
"""

from __future__ import annotations

import os
from typing import Any

from ..core.fileio import read_json
from ..core.trial import InputError, TestResult

_STATUSES = {"passed", "failed", "skipped", "pending", "other"}


def _in_ms(doc: dict, results: dict) -> bool:
    if "specVersion" in doc or "reportFormat" in doc:
        return True
    start = (results.get("summary") or {}).get("start") if isinstance(results.get("summary"), dict) else None
    return isinstance(start, (int, float)) and start > 1e11


def _file_of(test: dict, name: str) -> str | None:
    fp = test.get("filePath") or test.get("file_path") or test.get("file")
    if isinstance(fp, str) and fp:
        return fp
    # pytest node id: tests/test_outputs.py::TestX::test_y[1]
    head = name.split("::", 1)[0]
    return head if head.endswith(".py") else None


def parse_ctrf(doc: Any, path: str = "<memory>") -> list[TestResult]:
    """Tests of a CTRF document; raises :class:`InputError` when it has no ``results.tests`` list."""
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        raise InputError(path, "ctrf", "not a CTRF report (no results object)")
    results = doc["results"]
    tests = results.get("tests")
    if not isinstance(tests, list):
        raise InputError(path, "ctrf", "CTRF report without a results.tests list")
    scale = 1e-3 if _in_ms(doc, results) else 1.0
    out = []
    for t in tests:
        if not isinstance(t, dict):
            continue
        name = str(t.get("name") or "")
        status = str(t.get("status") or "other").lower()
        dur = t.get("duration")
        suite = t.get("suite")
        out.append(
            TestResult(
                name=name,
                status=status if status in _STATUSES else "other",
                duration_sec=float(dur) * scale if isinstance(dur, (int, float)) and not isinstance(dur, bool) else None,
                file_path=_file_of(t, name),
                suite="/".join(map(str, suite)) if isinstance(suite, list) else (suite if isinstance(suite, str) else None),
                message=(str(t["message"])[:500] if t.get("message") else None),
            )
        )
    return out


def read_ctrf(path: str | os.PathLike) -> list[TestResult]:
    return parse_ctrf(read_json(path, "ctrf"), str(path))
