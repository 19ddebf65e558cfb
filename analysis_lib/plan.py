"""The pre-registered analysis plan: read and validate it, hash it, record it beside the runs, run it.

``params/analysis_plan.yaml`` declares three tiers of metrics and how each is tested: primary
(formal tests, Holm-corrected), secondary (formal tests, Benjamini-Hochberg) and exploratory
(descriptive statistics and intervals only, no p-values), plus alpha, the bootstrap and the
pairing rule. The analysis reads the plan instead of hard-coding it, so that what is tested is
what was declared before looking (docs/analysis-plan.md).

Integrity: the plan's hash is the sha256 of its *parsed, canonical* form (the validated plan with
defaults filled in, as JSON with sorted keys), so comments and layout do not change it. The first
analysis of a runs folder records the plan in ``<runs>/analysis_plan.lock.json``; a later
analysis with another plan gets ``plan changed after data was analysed: ...`` and the diff at
the top of its reports (:class:`PlanCheck`).
"""

from __future__ import annotations

import difflib
import hashlib
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import __version__
from .fileio import atomic_write_json, read_json
from .metrics import CATEGORY_COLUMNS, MCP_TOOL_PREFIX, METRIC_COLUMNS
from .trial import InputError

__all__ = [
    "PlanError", "AnalysisPlan", "PlanMetric", "PLAN_METRICS", "PlanCheck", "LOCK_NAME", "PLAN_COLUMNS",
    "default_plan_path", "load_plan", "parse_plan", "plan_hash", "plan_yaml", "check_plan", "plan_columns",
    "run_plan", "describe_metric", "adjust_p",
]

LOCK_NAME = "analysis_plan.lock.json"
PLAN_FILE = Path("params") / "analysis_plan.yaml"
TIERS = ("primary", "secondary", "exploratory")


class PlanError(ValueError):
    """The plan file cannot be used; the message is one line naming the file and the key."""


@dataclass(frozen=True)
class PlanMetric:
    """A metric id of the plan: the metrics_detail.csv column(s) it reads and its kind."""

    id: str
    column: str  # a column, or the prefix of a column family (kind "per_tool")
    kind: str  # binary | continuous | per_tool
    label: str


# Plan ids of the methodology, mapped onto metrics_detail.csv columns (README "Metric reference").
PLAN_METRICS: dict[str, PlanMetric] = {m.id: m for m in (
    PlanMetric("resolve_rate", "success", "binary", "resolve rate"),
    PlanMetric("total_tokens", "total_tokens", "continuous", "total tokens"),
    PlanMetric("cost_per_task", "total_cost_usd", "continuous", "cost per task (USD)"),
    PlanMetric("wall_clock", "elapsed_sec", "continuous", "wall-clock time (s)"),
    PlanMetric("tool_call_count", "tool_calls_count", "continuous", "tool calls"),
    PlanMetric("files_explored", "exploration_breadth", "continuous", "files explored"),
    PlanMetric("mcp_calls_by_tool", MCP_TOOL_PREFIX, "per_tool", "MCP calls per tool"),
    PlanMetric("time_to_first_edit", "time_to_first_edit_sec", "continuous", "time to first edit (s)"),
    PlanMetric("steps_to_first_edit", "steps_to_first_edit", "continuous", "steps to first edit"),
    PlanMetric("duplicate_reads", "duplicate_reads", "continuous", "duplicate reads"),
)}
_BINARY_COLUMNS = {"success", "grep_before_edit", "tool_misuse", "infinite_loop", "budget_exhaustion", "premature_stop"}
_NOT_METRICS = {"tool_distribution", "mcp_calls_by_tool", "context_omission", "cost_estimated"}
TESTS = {"mcnemar_exact": "binary", "wilcoxon_signed_rank": "continuous", "descriptive": None}


def metric_info(metric_id: str) -> PlanMetric:
    """The plan metric for an id: a named plan metric, or a metrics_detail.csv column used as it is."""
    if metric_id in PLAN_METRICS:
        return PLAN_METRICS[metric_id]
    if metric_id in METRIC_COLUMNS + CATEGORY_COLUMNS and metric_id not in _NOT_METRICS:
        kind = "binary" if metric_id in _BINARY_COLUMNS else "continuous"
        return PlanMetric(metric_id, metric_id, kind, metric_id)
    raise ValueError(f"unknown metric {metric_id!r}; known: {', '.join(PLAN_METRICS)} or a numeric column of "
                     "metrics_detail.csv (README, Metric reference)")


# --------------------------------------------------------------------------- the model


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class MetricSpec(_Strict):
    """One planned metric and its test."""

    id: str
    test: Literal["mcnemar_exact", "wilcoxon_signed_rank", "descriptive"]

    @field_validator("id")
    @classmethod
    def _known(cls, v: str) -> str:
        metric_info(v)
        return v

    @model_validator(mode="after")
    def _test_fits(self) -> "MetricSpec":
        kind = metric_info(self.id).kind
        need = TESTS[self.test]
        if need is not None and kind != need:
            raise ValueError(f"test {self.test} needs a {need} metric, but {self.id} is {kind.replace('_', '-')}")
        return self


class Tier(_Strict):
    correction: Literal["holm", "fdr_bh", "none"]
    metrics: list[MetricSpec] = Field(min_length=1)


class Tiers(_Strict):
    primary: Tier
    secondary: Tier
    exploratory: Tier


class Pairing(_Strict):
    """The pairing rule; only what :mod:`analysis_lib.stats` implements can be declared."""

    unit: Literal["task"] = "task"
    binary_aggregate: Literal["majority_vote"] = "majority_vote"
    continuous_aggregate: Literal["median"] = "median"
    exclude_infra_errors: Literal[True] = True
    baseline: str | None = None


class Bootstrap(_Strict):
    n_resamples: int = Field(10_000, ge=100)
    confidence: float = Field(0.95, gt=0, lt=1)
    seed: int = 0
    method: Literal["percentile"] = "percentile"


class AnalysisPlan(_Strict):
    """The validated plan (see params/analysis_plan.yaml for the meaning of every key)."""

    name: str
    alpha: float = Field(gt=0, lt=1)
    pairing: Pairing = Pairing()
    bootstrap: Bootstrap = Bootstrap()
    tiers: Tiers

    @model_validator(mode="after")
    def _tier_rules(self) -> "AnalysisPlan":
        seen: dict[str, str] = {}
        for tier in TIERS:
            t: Tier = getattr(self.tiers, tier)
            for i, m in enumerate(t.metrics):
                where = f"tiers.{tier}.metrics[{i}]"
                if tier == "exploratory" and m.test != "descriptive":
                    raise ValueError(f"{where}.test: exploratory metrics are described, not tested (use descriptive)")
                if tier != "exploratory" and m.test == "descriptive":
                    raise ValueError(f"{where}.test: a {tier} metric needs a formal test (mcnemar_exact or wilcoxon_signed_rank)")
                if m.id in seen:
                    raise ValueError(f"{where}.id: {m.id} is already planned in the {seen[m.id]} tier")
                seen[m.id] = tier
        if self.tiers.exploratory.correction != "none":
            raise ValueError("tiers.exploratory.correction: exploratory metrics have no p-values to correct (use none)")
        return self

    def tier_metrics(self) -> list[tuple[str, MetricSpec, Tier]]:
        return [(tier, m, getattr(self.tiers, tier)) for tier in TIERS for m in getattr(self.tiers, tier).metrics]


# --------------------------------------------------------------------------- reading


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys silently; a plan must not hide a value that way."""


def _mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    keys = set()
    for k, _ in node.value:
        key = loader.construct_object(k, deep=deep)
        if key in keys:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", k.start_mark)
        keys.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


def _one_line(source: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = _loc(tuple(err["loc"]))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "literal_error":
            msg = f"unknown value {err.get('input')!r} ({msg.lower()})"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return f"{source}: invalid analysis plan: " + "; ".join(parts)


def display_path(path: str | os.PathLike) -> str:
    """A path for outputs: relative as given, or relative to the working folder, else the file name."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        root = Path(__file__).resolve().parents[1]
        try:
            return p.resolve().relative_to(root).as_posix()
        except ValueError:
            return p.name


def parse_plan(obj: Any, source: str = "<plan>") -> AnalysisPlan:
    """Validate a parsed plan object; raise :class:`PlanError` in one line naming ``source`` and the key."""
    if not isinstance(obj, dict):
        raise PlanError(f"{source}: invalid analysis plan: the top level must be a mapping, got {type(obj).__name__}")
    try:
        return AnalysisPlan.model_validate(obj)
    except ValidationError as exc:
        raise PlanError(_one_line(source, exc)) from None


def default_plan_path() -> Path:
    """``params/analysis_plan.yaml`` of the working folder, else of this checkout."""
    here = PLAN_FILE
    if here.is_file():
        return here
    return Path(__file__).resolve().parents[1] / PLAN_FILE


def load_plan(path: str | os.PathLike | None = None) -> AnalysisPlan:
    """Read and validate the plan file (default :func:`default_plan_path`); :class:`PlanError` says why not."""
    p = Path(path) if path is not None else default_plan_path()
    source = display_path(p)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"{source}: cannot read the analysis plan ({type(exc).__name__}: {exc.strerror or exc})") from None
    key = (source, text)
    if key in _LOADED:
        return _LOADED[key]  # plans are frozen models: sharing one is safe
    try:
        obj = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlanError(f"{source}: invalid analysis plan: {where}{problem}") from None
    plan = parse_plan(obj, source)
    _LOADED.clear()  # one plan is in use at a time; keep the last
    _LOADED[key] = plan
    return plan


# The last plan parsed, keyed by its source and text: every analysis reads the plan again, and
# parsing YAML in pure Python costs more than the rest of an unchanged re-run's bookkeeping.
_LOADED: dict[tuple, AnalysisPlan] = {}


# --------------------------------------------------------------------------- integrity


def _canonical(plan: AnalysisPlan | dict) -> dict:
    return plan.model_dump(mode="json") if isinstance(plan, AnalysisPlan) else plan


def plan_hash(plan: AnalysisPlan | dict) -> str:
    """sha256 of the canonical plan: the validated plan, defaults filled in, as JSON with sorted keys."""
    return hashlib.sha256(orjson.dumps(_canonical(plan), option=orjson.OPT_SORT_KEYS)).hexdigest()


def plan_yaml(plan: AnalysisPlan | dict) -> str:
    """The canonical plan as YAML with sorted keys (what the diffs compare)."""
    return yaml.safe_dump(_canonical(plan), sort_keys=True, default_flow_style=False, allow_unicode=True)


@dataclass
class PlanCheck:
    """The plan used by an analysis and how it compares with the one recorded beside the runs."""

    plan: AnalysisPlan
    sha256: str
    source: str
    recorded: dict | None = None
    recorded_now: bool = False
    changed: bool = False
    diff: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def short(self) -> str:
        return self.sha256[:12]

    def banner(self) -> list[str]:
        """Markdown lines for the very top of a report: the plan departure with its diff, and warnings."""
        out: list[str] = []
        if self.changed and self.recorded is not None:
            out += [f"> **plan changed after data was analysed:** the plan recorded in `{LOCK_NAME}` on "
                    f"{self.recorded.get('recorded_at', '?')} (sha256 `{str(self.recorded.get('analysis_plan_sha256'))[:12]}`) "
                    f"differs from the plan used for this report (`{self.source}`, sha256 `{self.short}`). "
                    "Results below follow the changed plan; the departure from the pre-registered one is:", "",
                    "```diff", self.diff.rstrip("\n"), "```", ""]
        for w in self.warnings:
            out += [f"> **analysis plan warning:** {w}", ""]
        return out

    def hash_line(self) -> str:
        return f"Analysis plan: `{self.source}` ({self.plan.name}), sha256 `{self.sha256}`."

    def sidecar(self) -> dict:
        """What ``analysis_plan.json`` beside the outputs holds (the hash, the plan, the record state)."""
        return {"analysis_plan_sha256": self.sha256, "plan_name": self.plan.name, "plan_source": self.source,
                "plan": _canonical(self.plan), "recorded_sha256": (self.recorded or {}).get("analysis_plan_sha256"),
                "plan_changed_after_analysis": self.changed, "warnings": self.warnings}


def lock_path(runs: str | os.PathLike) -> Path:
    """Where the plan record of a runs folder lives: ``<runs>/analysis_plan.lock.json``; for a single
    results file (mcpbr, Inspect log), ``<file>.analysis_plan.lock.json`` beside it."""
    p = Path(runs)
    return p.with_name(p.name + "." + LOCK_NAME) if p.is_file() else p / LOCK_NAME


def check_plan(runs_dir: str | os.PathLike, plan: AnalysisPlan, source: str = PLAN_FILE.as_posix(), *,
               record: bool = True, now: datetime | None = None) -> PlanCheck:
    """Compare ``plan`` with the record in ``runs_dir/analysis_plan.lock.json``; write the record when absent.

    The record is written once, atomically, by the first analysis (``record=True``); it is never
    replaced. A runs folder that cannot be written gets a warning, not an error; so does an
    unreadable record (it is left alone).
    """
    sha = plan_hash(plan)
    check = PlanCheck(plan, sha, source)
    lock = lock_path(runs_dir)
    if lock.exists():
        try:
            rec = read_json(lock, "plan")
            if not isinstance(rec, dict) or not isinstance(rec.get("analysis_plan_sha256"), str):
                raise InputError(str(lock), "plan", "not an analysis plan record")
        except InputError as exc:
            check.warnings.append(f"{LOCK_NAME}: unreadable plan record, left as it is ({exc.error.message}); "
                                  "the plan cannot be compared with the one of the first analysis")
            return check
        check.recorded = rec
        if rec["analysis_plan_sha256"] != sha:
            check.changed = True
            old = rec.get("plan") if isinstance(rec.get("plan"), dict) else {}
            check.diff = "".join(difflib.unified_diff(
                plan_yaml(old).splitlines(keepends=True), plan_yaml(plan).splitlines(keepends=True),
                fromfile=f"recorded plan ({rec.get('recorded_at', '?')})", tofile=f"{source} (this analysis)"))
        return check
    if not record:
        return check
    stamp = (now or datetime.now(timezone.utc)).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    rec = {"analysis_plan_sha256": sha, "plan_name": plan.name, "plan_source": source, "plan": _canonical(plan),
           "recorded_at": stamp, "tool": "analysis_lib", "tool_version": __version__,
           "note": "Recorded by the first analysis of these runs. Do not edit: later analyses compare their plan with this one."}
    try:
        atomic_write_json(lock, rec)
    except OSError as exc:
        check.warnings.append(f"{display_path(lock)}: plan record not written ({type(exc).__name__}: "
                              f"{exc.strerror or exc}); later changes of the plan cannot be detected for these runs")
        return check
    check.recorded, check.recorded_now = rec, True
    return check


SIDECAR_NAME = "analysis_plan.json"


def write_sidecar(out_dir: str | os.PathLike, check: PlanCheck) -> Path:
    """``out_dir/analysis_plan.json``: the plan hash of every CSV written in that folder by the analysis."""
    return atomic_write_json(Path(out_dir) / SIDECAR_NAME, {
        **check.sidecar(), "covers": "every CSV file this analysis wrote in this folder (JSON and Markdown outputs "
                                     "carry the hash themselves)"})


# --------------------------------------------------------------------------- running the plan

PLAN_COLUMNS = [
    "tier", "metric_id", "column", "test", "profile_a", "profile_b", "n_pairs", "a_value", "b_value", "difference",
    "ci_low", "ci_high", "ci_of", "relative_change_pct", "effect_size", "effect_size_name", "statistic", "p_value",
    "p_adjusted", "correction", "significant", "note",
]
TEST_LABELS = {"mcnemar_exact": "McNemar exact (binomial, two-sided)", "wilcoxon_signed_rank": "Wilcoxon signed-rank",
               "descriptive": "descriptive (no test)"}


def plan_columns(metrics: pd.DataFrame, metric_id: str) -> list[str]:
    """The metrics_detail.csv columns a plan metric reads (a family such as ``mcp_calls__*`` expands)."""
    info = metric_info(metric_id)
    if info.kind == "per_tool":
        return sorted(c for c in metrics.columns if c.startswith(info.column))
    return [info.column] if info.column in metrics.columns else []


def adjust_p(p_values, method: str) -> np.ndarray:
    """Multiplicity-adjusted p-values; NaN stays NaN.

    ``holm``: :func:`analysis_lib.stats.holm` (Holm 1979). ``fdr_bh``: Benjamini & Hochberg (1995),
    JRSS B 57:289-300, through statsmodels ``multipletests(method="fdr_bh")``. ``none``: unchanged.
    """
    p = np.asarray(p_values, dtype=float)
    if method == "none":
        return p.copy()
    if method == "holm":
        from .stats import holm  # scipy: imported when a plan is run, not when it is read

        return holm(p)
    if method == "fdr_bh":
        from statsmodels.stats.multitest import multipletests

        out = np.full(p.shape, np.nan)
        ok = ~np.isnan(p)
        if ok.any():
            out[ok] = multipletests(p[ok], method="fdr_bh")[1]
        return out
    raise ValueError(f"correction must be 'holm', 'fdr_bh' or 'none', got {method!r}")


def _relative(a: float, b: float) -> float:
    return 100.0 * (b - a) / a if a and np.isfinite(a) and np.isfinite(b) else np.nan


def _metric_row(trials: pd.DataFrame, column: str, kind: str, test: str, a: str, b: str, boot: Bootstrap) -> dict:
    from . import stats  # scipy: imported when a plan is run, not when it is read (Layer 1 only reads it)

    binary = kind == "binary"
    pairs = stats.pair_tasks(trials, column, a, b, binary=binary)
    row: dict[str, Any] = {"column": column, "test": TEST_LABELS[test], "profile_a": a, "profile_b": b,
                           "n_pairs": len(pairs)}
    if binary:
        row.update(ci_of="difference in resolve rate (B-A)" if column == "success" else "difference in rate (B-A)")
    else:
        row.update(ci_of="median paired difference (B-A)")
    if len(pairs) == 0:
        row["note"] = "no task with values under both profiles"
        return row
    if binary:
        va, vb = float(pairs["a"].mean()), float(pairs["b"].mean())
        ci = stats.bootstrap_paired(pairs["a"], pairs["b"], statistics=("mean_diff",), n_boot=boot.n_resamples,
                                    seed=boot.seed, confidence=boot.confidence).iloc[0]
        row.update(a_value=va, b_value=vb, difference=vb - va, ci_low=ci["ci_low"], ci_high=ci["ci_high"],
                   relative_change_pct=_relative(va, vb))
        if test == "mcnemar_exact":
            t = stats.mcnemar_from_table(stats.mcnemar_table(pairs["a"] > 0.5, pairs["b"] > 0.5).to_numpy(), exact=True).iloc[0]
            row.update(statistic=float(t["statistic"]), p_value=float(t["p_val"]),
                       effect_size=float(stats.cohens_h(va, vb)), effect_size_name="Cohen's h (B-A)")
        return row
    va, vb = float(pairs["a"].median()), float(pairs["b"].median())
    ci = stats.bootstrap_paired(pairs["a"], pairs["b"], statistics=("median_diff",), n_boot=boot.n_resamples,
                                seed=boot.seed, confidence=boot.confidence).iloc[0]
    row.update(a_value=va, b_value=vb, difference=float(ci["estimate"]), ci_low=float(ci["ci_low"]),
               ci_high=float(ci["ci_high"]), relative_change_pct=_relative(va, vb))
    if test == "wilcoxon_signed_rank":
        # wilcoxon(x=b, y=a): d = B - A, so V sums the ranks of the tasks where B is larger.
        w = stats.wilcoxon(pairs["b"], pairs["a"]).iloc[0]
        row.update(test=f"{TEST_LABELS[test]} ({w['method']})", statistic=float(w["V"]), p_value=float(w["p_val"]),
                   effect_size=float(w["RBC"]), effect_size_name="matched-pairs rank-biserial r (B-A)")
    return row


def run_plan(metrics: pd.DataFrame, plan: AnalysisPlan, pairs: list[tuple[str, str]], *,
             refused: dict[str, str] | None = None) -> pd.DataFrame:
    """Every planned metric for every profile pair (B against baseline A), tier by tier, as a tidy frame.

    Tests, intervals and effect sizes come from :mod:`analysis_lib.stats` with the plan's pairing
    and bootstrap; p-values are adjusted within each tier and profile pair by the tier's
    correction (a planned test without a p-value counts as p = 1, so the family keeps its declared
    size), and ``significant`` is ``p_adjusted < alpha``. Exploratory rows carry intervals
    and no p-value. ``refused`` maps a column (e.g. ``success``) to the reason it must not be
    analysed (missing evaluations): its rows carry only that reason. A planned metric absent from
    ``metrics`` gets a row saying so. Returns ``PLAN_COLUMNS``.
    """
    from .compare import usable_trials

    trials = usable_trials(metrics)
    refused = refused or {}
    rows: list[dict] = []
    for tier, spec, tier_def in plan.tier_metrics():
        info = metric_info(spec.id)
        cols = plan_columns(trials, spec.id)
        for a, b in pairs:
            base = {"tier": tier, "metric_id": spec.id, "correction": tier_def.correction, "profile_a": a, "profile_b": b,
                    "test": TEST_LABELS[spec.test]}
            if not cols:
                rows.append({**base, "column": info.column, "n_pairs": 0,
                             "note": "no MCP tool was called in these runs" if info.kind == "per_tool"
                             else f"column {info.column!r} is not in the metrics table"})
                continue
            for col in cols:
                if col in refused:
                    rows.append({**base, "column": col, "n_pairs": 0, "note": refused[col]})
                    continue
                kind = "continuous" if info.kind == "per_tool" else info.kind
                rows.append({**base, **_metric_row(trials, col, kind, spec.test, a, b, plan.bootstrap),
                             "tier": tier, "metric_id": spec.id, "correction": tier_def.correction})
    out = pd.DataFrame(rows, columns=PLAN_COLUMNS)
    for c in ("a_value", "b_value", "difference", "ci_low", "ci_high", "relative_change_pct", "effect_size", "statistic",
              "p_value", "p_adjusted"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    out["n_pairs"] = out["n_pairs"].fillna(0).astype(int)
    for tier in ("primary", "secondary"):
        method = getattr(plan.tiers, tier).correction
        for (a, b), idx in out[out["tier"] == tier].groupby(["profile_a", "profile_b"], sort=False).groups.items():
            p = out.loc[idx, "p_value"].to_numpy(float)
            # A planned test that could not run (refused, no data) still counts in its family, as p = 1:
            # the family keeps its pre-registered size and the correction never gets weaker.
            adj = adjust_p(np.where(np.isnan(p), 1.0, p), method)
            out.loc[idx, "p_adjusted"] = np.where(np.isnan(p), np.nan, adj)
    formal = out["tier"] != "exploratory"
    sig = pd.Series(pd.NA, index=out.index, dtype="boolean")
    has_p = formal & out["p_adjusted"].notna()
    sig[has_p] = out.loc[has_p, "p_adjusted"] < plan.alpha
    out["significant"] = sig
    return out


def describe_metric(metrics: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per profile: trials with a value, mean, median, quartiles (infra errors left out)."""
    from .compare import usable_trials

    trials = usable_trials(metrics)
    v = pd.to_numeric(trials[column], errors="coerce").replace([np.inf, -np.inf], np.nan)
    g = v.groupby(trials["profile"].astype(str))
    out = pd.DataFrame({"n": g.count(), "mean": g.mean(), "median": g.median(), "q25": g.quantile(0.25),
                        "q75": g.quantile(0.75)})
    out.index.name = "profile"
    return out.reset_index()


