"""The ``command_json`` evaluation contract: a task's verdict from an external command.

The command runs without a shell, with ``{task_id}``, ``{condition}``, ``{repo_path}``,
``{trial_dir}`` and ``{python}`` (the runner's interpreter) substituted inside single arguments,
under ``timeout_seconds``; a bare ``python``/``python3`` program is the runner's interpreter too. Its stdout must be
one JSON object ``{"status": "ok", "passed": bool, "details_path": optional str}``. Anything else
(timeout, non-zero exit, garbage, ``status`` other than ok) is an *evaluation error*: the trial's
outcome is unknown, never counted as a failed task.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from .manifest import EvaluationSpec
from .process import run_process, substitute

# stdout/stderr excerpts kept in the record (enough to diagnose, not a log dump).
EXCERPT_CHARS = 500


@dataclass(slots=True)
class EvaluationResult:
    status: str  # "ok" | "error"
    passed: bool | None  # None when status is "error"
    error: str | None = None
    details_path: str | None = None  # as reported by the evaluator
    returncode: int | None = None
    duration_sec: float | None = None
    stderr_excerpt: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k in ("status", "passed")}


def _excerpt(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text[-EXCERPT_CHARS:]


def parse_verdict(stdout: bytes) -> tuple[bool, str | None]:
    """Read ``{"status": "ok", "passed": bool, "details_path": ...}`` from stdout; ValueError says why not.

    The last non-empty line is taken, so an evaluator may log progress before its verdict line.
    """
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        raise ValueError("empty stdout, expected a JSON verdict")
    try:
        obj = orjson.loads(lines[-1])
    except orjson.JSONDecodeError:
        try:
            obj = orjson.loads(stdout)  # a pretty-printed multi-line object
        except orjson.JSONDecodeError:
            raise ValueError(f"stdout is not JSON: {lines[-1][:120].decode('utf-8', 'replace')!r}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"verdict must be a JSON object, got {type(obj).__name__}")
    if obj.get("status") != "ok":
        raise ValueError(f"verdict status is {obj.get('status')!r}, not 'ok'" + (f": {obj['error']}" if "error" in obj else ""))
    passed = obj.get("passed")
    if not isinstance(passed, bool):
        raise ValueError(f"verdict 'passed' must be true or false, got {passed!r}")
    details = obj.get("details_path")
    if details is not None and not isinstance(details, str):
        raise ValueError(f"verdict 'details_path' must be a string, got {type(details).__name__}")
    return passed, details


def evaluator_argv(command: list[str], values: Mapping[str, str]) -> list[str]:
    """The command with placeholders filled; ``python``/``python3``/``{python}`` as the program is the
    runner's own interpreter, so ``python -m analysis_lib...`` works without an activated venv."""
    argv = substitute(command, {**values, "python": sys.executable})
    if command and command[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


def run_evaluation(
    spec: EvaluationSpec,
    values: Mapping[str, str],
    cwd: str | os.PathLike,
    env: Mapping[str, str] | None = None,
) -> EvaluationResult:
    """Run the evaluation command for one trial and classify the outcome (see module docstring)."""
    argv = evaluator_argv(spec.command, values)
    # Supervised: a test server or worker the evaluator leaves behind ends with it.
    res = run_process(argv, cwd=cwd, env=env, timeout=spec.timeout_seconds, supervise=True)
    common = dict(returncode=res.returncode, duration_sec=round(res.duration_sec, 3), stderr_excerpt=_excerpt(res.stderr) or None)
    if res.error:
        return EvaluationResult("error", None, error=f"evaluator could not start ({res.error}): {shlex.join(argv)[:300]}", **common)
    if res.timed_out:
        return EvaluationResult("error", None, error=f"timed out after {spec.timeout_seconds:g} s", **common)
    if res.returncode != 0:
        return EvaluationResult("error", None, error=f"evaluator exited with code {res.returncode}", **common)
    try:
        passed, details = parse_verdict(res.stdout)
    except ValueError as exc:
        return EvaluationResult("error", None, error=str(exc), **common)
    return EvaluationResult("ok", passed, details_path=details, **common)
