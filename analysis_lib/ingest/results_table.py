"""Published per-task results tables, imported as trials: a documented CSV and SkillsBench's results registry.

Much of what the field publishes is not trial folders but one row per configuration, arm and task: how many
trials ran and how many passed. Each row becomes that many trials (repetitions 1..k, ``p`` of them passed), so
pass rates, the all-repetitions inference, pass@k and the pooling across configurations read them like any
other trials. What a table does not carry (tokens, tool calls, times, tests) stays empty, never 0.

**CSV** (``docs/formats.md``): a header naming at least ``config, arm, task_id, trials, passes``; optional
``mean_reward`` (0 to 1), ``tokens`` (total tokens per trial, the mean of the row's trials) and ``cost`` (USD
per trial, the same). ``passes`` are the table's own verdicts. When ``mean_reward x trials = passes`` the
rewards were all or nothing and each trial gets its reward (1 or 0), so a study's success rule re-decides
them; otherwise a trial's reward is unknown and its success is the table's. ``tokens`` and ``cost`` give every
trial of the row the row's mean: per-task means (what a comparison pairs) are exact, per-trial spreads unknown.
A table of per-task majority verdicts is ``trials`` = 1: McNemar's test on the discordant tasks runs on it.

**SkillsBench registry** (``website-data/results-registry.json``): a JSON list of ``{task, model, modelShort,
harness, family, condition, score, trials, passCount, perfectCount}``. ``perfectCount`` trials had reward 1,
``passCount - perfectCount`` a partial reward (above 0, below 1) and the rest reward 0; ``score`` is the mean
reward in percent. The partial-credit trials of a record each get the mean of their rewards,
``(score/100 x trials - perfectCount) / (passCount - perfectCount)``, the only value the record gives: a success
rule ``reward == 1`` then counts ``perfectCount``, ``reward > 0`` counts ``passCount``, and the mean reward of
the record is kept (to the rounding of ``score``). A configuration is the pair (``model``, ``harness``).

Trials are named ``<configuration> / <arm>`` (their default profile, until a study file says otherwise) and
carry ``configuration`` and ``arm`` in their record (the ``run_config`` column), the registry's model, harness
and family too. ``trial_path`` is ``<file>#<configuration>/<arm>/<task>/<repetition>``.
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any

from ..core.fileio import read_bytes, read_json
from ..core.trial import IngestError, InputError, Trial
from ._carried import as_float, as_int

STAGE = "import"
CSV_FORMAT = "results_csv"
REGISTRY_FORMAT = "skillsbench_registry"
CSV_REQUIRED = ("config", "arm", "task_id", "trials", "passes")
CSV_OPTIONAL = ("mean_reward", "tokens", "cost")
REGISTRY_KEYS = ("task", "model", "harness", "condition", "trials", "passCount")
# Two numbers closer than this are one (a mean reward written with a few decimals, times the trials).
_TOLERANCE = 1e-6
_HEAD_BYTES = 8192

__all__ = ["CSV_REQUIRED", "CSV_OPTIONAL", "is_results_csv", "is_skillsbench_registry", "read_results_csv",
           "read_skillsbench_registry", "profile_name"]


def profile_name(configuration: str, arm: str) -> str:
    """The default profile of a results table's trials: ``<configuration> / <arm>``."""
    return f"{configuration} / {arm}"


def _head(path: str | os.PathLike) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(_HEAD_BYTES).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    except OSError:
        return ""


def _header(text: str) -> list[str]:
    first = text.splitlines()[0] if text else ""
    return [c.strip().lower() for c in next(csv.reader([first]), [])]


def is_results_csv(path: str | os.PathLike) -> bool:
    """True for a CSV whose header names every required column of a results table (``CSV_REQUIRED``)."""
    return str(path).lower().endswith(".csv") and set(CSV_REQUIRED) <= set(_header(_head(path)))


def is_skillsbench_registry(path: str | os.PathLike) -> bool:
    """True for a JSON list whose first record has the registry's keys (``REGISTRY_KEYS``); only the first
    8 KB are read."""
    head = _head(path)
    if not head.startswith("["):
        return False
    first = head[: head.find("}") + 1] if "}" in head else head
    return all(f'"{k}"' in first for k in REGISTRY_KEYS)


def _trials(path: Path, fmt: str, configuration: str, arm: str, task: str, rewards: list[float | None],
            passes: int, meta: dict[str, Any], carried: dict[str, Any]) -> list[Trial]:
    """The trials of one row: ``len(rewards)`` repetitions, the first ``passes`` of them passed."""
    profile = profile_name(configuration, arm)
    out = []
    for i, reward in enumerate(rewards):
        trial_carried = dict(carried)
        if reward is None:
            trial_carried["success"] = i < passes
        out.append(Trial(
            profile=profile, task_id=task, repetition=i + 1, run_id=path.stem,
            trial_path=f"{path}#{configuration}/{arm}/{task}/{i + 1}", source_format=fmt, reward=reward,
            paths={"results": str(path)}, carried_metrics=trial_carried,
            metadata={**meta, "task_name": task, "config": {**meta.get("config", {}), "configuration": configuration,
                                                             "arm": arm}},
        ))
    return out


def read_results_csv(path: str | os.PathLike) -> tuple[list[Trial], list[IngestError]]:
    """Read a results CSV (module docstring): the trials of every good row, one error per bad row or file."""
    p = Path(path)
    try:
        text = read_bytes(p, STAGE).decode("utf-8-sig", errors="strict")
    except UnicodeDecodeError as exc:
        return [], [IngestError(str(p), STAGE, f"not UTF-8 text (byte {exc.start})")]
    except InputError as exc:
        return [], [exc.error]
    reader = csv.DictReader(io.StringIO(text))
    columns = [c.strip().lower() for c in reader.fieldnames or []]
    missing = [c for c in CSV_REQUIRED if c not in columns]
    if missing:
        return [], [IngestError(str(p), STAGE, f"not a results table: no column {', '.join(missing)} "
                                f"(needs {', '.join(CSV_REQUIRED)})")]
    trials: list[Trial] = []
    errors: list[IngestError] = []
    seen: set[tuple[str, str, str]] = set()
    partial = 0
    for line, raw in enumerate(reader, start=2):
        row = {str(k).strip().lower(): (v.strip() if isinstance(v, str) else v) for k, v in raw.items() if k is not None}
        where = f"line {line}"
        config, arm, task = row.get("config") or "", row.get("arm") or "", row.get("task_id") or ""
        if not (config and arm and task):
            errors.append(IngestError(str(p), STAGE, f"{where}: config, arm and task_id must not be empty"))
            continue
        n, k = _count(row.get("trials")), _count(row.get("passes"))
        if n is None or n < 1 or k is None or k > n:
            errors.append(IngestError(str(p), STAGE, f"{where}: trials must be a whole number >= 1 and passes a "
                                      f"whole number from 0 to trials (got {row.get('trials')!r}, {row.get('passes')!r})"))
            continue
        numbers = {c: _number(row.get(c)) for c in CSV_OPTIONAL}
        bad = [c for c in CSV_OPTIONAL if row.get(c) not in (None, "") and numbers[c] is None]
        mean_reward = numbers["mean_reward"]
        if mean_reward is not None and not 0 <= mean_reward <= 1:
            bad.append("mean_reward")
        if bad:
            errors.append(IngestError(str(p), STAGE, f"{where}: {', '.join(bad)} is not a number in range "
                                      "(mean_reward 0 to 1, tokens and cost >= 0); row skipped"))
            continue
        if (config, arm, task) in seen:
            errors.append(IngestError(str(p), STAGE, f"{where}: a second row for {config} / {arm} / {task}; its "
                                      "trials count as further repetitions", "warning"))
        seen.add((config, arm, task))
        all_or_nothing = mean_reward is not None and abs(mean_reward * n - k) < 1e-3 * n
        partial += mean_reward is not None and not all_or_nothing
        rewards: list[float | None] = [1.0 if i < k else 0.0 for i in range(n)] if all_or_nothing else [None] * n
        carried = {m: numbers[c] for c, m in (("tokens", "total_tokens"), ("cost", "total_cost_usd"))
                   if numbers[c] is not None}
        meta = {"table_mean_reward": mean_reward, "agent_name": None, "model_name": None}
        trials += _trials(p, CSV_FORMAT, config, arm, task, rewards, k, meta, carried)
    if partial:
        errors.append(IngestError(str(p), STAGE, f"{partial} rows have a mean reward between the all-or-nothing "
                                  "values: their trials' rewards are unknown and their success is the table's passes "
                                  "(a success rule cannot re-decide them)", "warning"))
    if not trials and not errors:
        errors.append(IngestError(str(p), STAGE, "results table without rows"))
    return trials, errors


def _count(v: Any) -> int | None:
    x = _number(v)
    return int(x) if x is not None and x.is_integer() else None


def _number(v: Any) -> float | None:
    """A finite non-negative number from a CSV cell or JSON value; None when empty or not one."""
    if isinstance(v, str):
        if not v.strip():
            return None
        try:
            v = float(v)
        except ValueError:
            return None
    x = as_float(v)
    return x if x is not None and math.isfinite(x) and x >= 0 else None


def read_skillsbench_registry(path: str | os.PathLike) -> tuple[list[Trial], list[IngestError]]:
    """Read SkillsBench's results registry (module docstring): the trials of every good record, one error per
    bad record or file."""
    p = Path(path)
    try:
        records = read_json(p, STAGE)
    except InputError as exc:
        return [], [exc.error]
    if not isinstance(records, list):
        return [], [IngestError(str(p), STAGE, f"expected a JSON list of records, got {type(records).__name__}")]
    good = [r for r in records if isinstance(r, dict)]
    # modelShort repeats across harnesses and a model name might too: a configuration is (model, harness).
    harnesses: dict[str, set[str]] = {}
    for r in good:
        harnesses.setdefault(str(r.get("model")), set()).add(str(r.get("harness")))
    trials: list[Trial] = []
    errors: list[IngestError] = []
    seen: set[tuple[str, str, str, str]] = set()
    for i, r in enumerate(records):
        where = f"record {i}"
        if not isinstance(r, dict):
            errors.append(IngestError(str(p), STAGE, f"{where}: a {type(r).__name__}, expected an object"))
            continue
        missing = [k for k in REGISTRY_KEYS if r.get(k) in (None, "")]
        if missing:
            errors.append(IngestError(str(p), STAGE, f"{where}: no {', '.join(missing)}"))
            continue
        model, harness, task, arm = str(r["model"]), str(r["harness"]), str(r["task"]), str(r["condition"])
        n, k = as_int(r["trials"]), as_int(r["passCount"])
        perfect = as_int(r.get("perfectCount")) if r.get("perfectCount") is not None else None
        score = _number(r.get("score"))
        if n is None or n < 1 or k is None or k > n or (perfect is not None and perfect > k):
            errors.append(IngestError(str(p), STAGE, f"{where} ({model}, {task}, {arm}): trials must be >= 1 and "
                                      "0 <= perfectCount <= passCount <= trials"))
            continue
        if (model, harness, task, arm) in seen:
            errors.append(IngestError(str(p), STAGE, f"{where}: a second record for {model} / {harness} / {task} / "
                                      f"{arm}; its trials count as further repetitions", "warning"))
        seen.add((model, harness, task, arm))
        rewards = _registry_rewards(n, k, perfect, score)
        configuration = model if len(harnesses[model]) == 1 else f"{model} [{harness}]"
        meta = {"agent_name": harness, "model_name": r.get("modelShort") if isinstance(r.get("modelShort"), str) else None,
                "config": {k2: r[k1] for k1, k2 in (("model", "model"), ("harness", "harness"),
                                                     ("modelShort", "model_short"), ("family", "family"))
                           if isinstance(r.get(k1), str)},
                "table_mean_reward": None if score is None else score / 100}
        trials += _trials(p, REGISTRY_FORMAT, configuration, arm, task, rewards, k, meta, {})
    if not trials and not errors:
        errors.append(IngestError(str(p), STAGE, "results registry without records"))
    return trials, errors


def _registry_rewards(n: int, passes: int, perfect: int | None, score: float | None) -> list[float | None]:
    """Per-trial rewards of a record: 1 for the perfect trials, the mean partial reward for the other passes,
    0 for the rest; unknown (None) for the passes when the record lacks ``perfectCount`` or ``score``."""
    if perfect is None:
        return [None] * passes + [0.0] * (n - passes)
    partial: float | None = None
    if passes > perfect:
        if score is None:
            return [None] * passes + [0.0] * (n - passes)
        mean = (score / 100 * n - perfect) / (passes - perfect)
        # The score is rounded to a tenth of a percent; a partial reward lies strictly between 0 and 1.
        partial = min(max(mean, _TOLERANCE), 1 - _TOLERANCE)
    return [1.0] * perfect + [partial] * (passes - perfect) + [0.0] * (n - passes)
