"""The pre-registered analysis plan: read and validate it, hash it, record it and date it against the data.

``params/analysis_plan.yaml`` declares three tiers of metrics and how each is tested: primary
(formal tests, Holm-corrected), secondary (formal tests, Benjamini-Hochberg) and exploratory
(descriptive statistics and intervals only, no p-values), plus alpha, the bootstrap and the
pairing rule. Metric ids are the columns of ``metrics_detail.csv`` (:mod:`analysis_lib.core.registry`).
The comparison engine (:mod:`analysis_lib.inference.comparisons`) reads the plan instead of hard-coding it,
so that what is tested is what was declared before looking (docs/analysis-plan.md). Each tier's
correction runs over all its rows: every metric of the tier and every profile pair.

Integrity: the plan's hash is the sha256 of its *parsed, canonical* form (the validated plan with
defaults filled in, as JSON with sorted keys), so comments and layout do not change it. The runner
records the plan in the run record (``<runs>/analysis_plan.lock.json``) before the first trial:
that is the pre-registration. The analysis never writes into the runs it reads: without a run
record, the first analysis records the plan in its output folder. A later analysis with another
plan gets ``plan changed after the plan record`` and the diff at the top of its reports, and a
record dated after the first trial is flagged as not a pre-registration (:class:`PlanCheck`).
"""

from __future__ import annotations

import difflib
import hashlib
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core import outputs as files
from ..core import registry
from ..core.fileio import atomic_write_json, read_json
from ..core.trial import InputError
from ..core.version import __version__

__all__ = [
    "PlanError", "AnalysisPlan", "BesideItt", "PartialCredit", "Sequential", "PlanCheck", "LOCK_NAME", "default_plan_path", "load_plan", "parse_plan",
    "plan_hash", "plan_yaml", "plan_record", "write_preregistration", "check_plan", "metric_kind",
]

LOCK_NAME = files.PLAN_RECORD
PLAN_FILE = Path("params") / "analysis_plan.yaml"
TIERS = ("primary", "secondary", "exploratory")


class PlanError(ValueError):
    """The plan file cannot be used; the message is one line naming the file and the key."""


# Ids of earlier plans and the column each one meant: a plan that still uses one is told the new id.
RENAMED = {"resolve_rate": "success", "cost_per_task": "total_cost_usd", "wall_clock": "elapsed_sec",
           "tool_call_count": "tool_calls_count", "files_explored": "exploration_breadth",
           "mcp_calls_by_tool": "mcp_calls__*", "time_to_first_edit": "time_to_first_edit_sec"}
TESTS = {"mcnemar_exact": "binary", "mcnemar_midp": "binary", "paired_t": "binary", "sign_flip": "binary", "gee": "binary",
         "wilcoxon_signed_rank": "continuous", "descriptive": None}
# Which tests fit which way of combining repetitions (pairing.repetitions, or a sensitivity row's own).
MAJORITY_TESTS = ("mcnemar_exact", "mcnemar_midp")
ALL_REPETITION_TESTS = ("paired_t", "sign_flip", "gee")
AGGREGATES = {"majority": ("majority_vote", "median"), "all": ("pass_rate", "geometric_mean")}


def metric_kind(metric_id: str) -> str:
    """``binary`` or ``continuous`` for a plannable id (a column, ``mcp_calls__*``, or cost_per_success)."""
    if metric_id in RENAMED:
        raise ValueError(f"unknown metric {metric_id!r}: plan ids are the columns of metrics_detail.csv; "
                         f"use {RENAMED[metric_id]!r}")
    if metric_id == registry.MCP_TOOL_PREFIX + "*":
        return "continuous"
    m = registry.metric(metric_id)
    if not m.testable:
        raise ValueError(f"{metric_id!r} is not a numeric metric (README, Metric reference)")
    if metric_id in registry.DERIVED and metric_id != "cost_per_success":
        raise ValueError(f"{metric_id!r} is a profile-level rate; plan 'success' to compare it")
    return "binary" if m.kind == "binary" else "continuous"


# --------------------------------------------------------------------------- the model


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class MetricSpec(_Strict):
    """One planned metric and its test."""

    id: str
    test: Literal["mcnemar_exact", "mcnemar_midp", "paired_t", "sign_flip", "gee", "wilcoxon_signed_rank", "descriptive"]
    # Only in the sensitivity tier: combine repetitions otherwise than the plan's pairing does.
    repetitions: Literal["majority", "all"] | None = None

    @field_validator("id")
    @classmethod
    def _known(cls, v: str) -> str:
        metric_kind(v)
        return v

    @model_validator(mode="after")
    def _test_fits(self) -> MetricSpec:
        kind = metric_kind(self.id)
        need = TESTS[self.test]
        if need is not None and kind != need:
            raise ValueError(f"test {self.test} needs a {need} metric, but {self.id} is {kind}")
        if self.id == "cost_per_success" and self.test != "descriptive":
            raise ValueError("cost_per_success is a ratio of totals with a bootstrap interval: use descriptive")
        return self


class Tier(_Strict):
    correction: Literal["holm", "fdr_bh", "none"]
    metrics: list[MetricSpec] = Field(min_length=1)


class Tiers(_Strict):
    primary: Tier
    secondary: Tier
    exploratory: Tier
    sensitivity: Tier | None = None


class Pairing(_Strict):
    """The pairing rule; only what :mod:`analysis_lib.stats` implements can be declared."""

    unit: Literal["task"] = "task"
    # majority: a task's repetitions give one verdict by majority vote (a tie fails) and the median of
    # continuous metrics; all: every repetition counts, as the task's pass rate and geometric mean.
    repetitions: Literal["majority", "all"] = "majority"
    binary_aggregate: Literal["majority_vote", "pass_rate"] = "majority_vote"
    continuous_aggregate: Literal["median", "geometric_mean"] = "median"
    exclude_infra_errors: Literal[True] = True
    baseline: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _aggregates_follow_repetitions(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("repetitions") in AGGREGATES:
            binary, continuous = AGGREGATES[data["repetitions"]]
            data = {"binary_aggregate": binary, "continuous_aggregate": continuous, **data}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Pairing:
        if (self.binary_aggregate, self.continuous_aggregate) != AGGREGATES[self.repetitions]:
            binary, continuous = AGGREGATES[self.repetitions]
            raise ValueError(f"repetitions: {self.repetitions} aggregates by {binary} and {continuous}; "
                             "leave binary_aggregate and continuous_aggregate out or set them so")
        return self


class Bootstrap(_Strict):
    # default= by keyword: type checkers read Field's default only so (PEP 681).
    n_resamples: int = Field(default=10_000, ge=100)
    confidence: float = Field(default=0.95, gt=0, lt=1)
    seed: int = 0
    method: Literal["percentile"] = "percentile"


class Hypothesis(_Strict):
    """One step of a fixed-sequence (gatekeeping) claim about B against the baseline.

    ``superior``: B better in the metric's direction; ``noninferior``: B not worse by more than
    ``margin``; ``equivalent``: B within ``margin`` either way (TOST). Margins are in the
    comparison's own scale: a fraction of the rate for pass/fail (0.05 = 5 points), a relative
    change for ratio metrics (0.10: B/A between 1/1.1 and 1.1, symmetric on the log scale).
    """

    id: str
    claim: Literal["superior", "noninferior", "equivalent"]
    margin: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _margin_fits(self) -> Hypothesis:
        kind = metric_kind(self.id)
        if self.id.endswith("*") or self.id == "cost_per_success":
            raise ValueError(f"{self.id}: a hypothesis needs a single tested metric")
        if self.claim == "superior" and self.margin is not None:
            raise ValueError("a superiority claim has no margin")
        if self.claim != "superior" and self.margin is None:
            raise ValueError(f"a {self.claim} claim needs a margin (> 0)")
        if kind == "continuous" and registry.metric(self.id).scale != "ratio":
            raise ValueError(f"{self.id}: hypotheses are supported for pass/fail and ratio-scale metrics")
        if registry.metric(self.id).direction == "none" and self.claim != "equivalent":
            raise ValueError(f"{self.id} has no better direction: only an equivalence claim fits")
        return self


# Trajectory behaviours a mediation decomposition may go through, and the outcomes it decomposes.
MEDIATORS = ("files_read", "exploration_breadth", "steps_to_first_edit")
MEDIATION_OUTCOMES = ("success", "total_tokens")


def _plain_metric(where: str, metric_id: str) -> str:
    try:
        kind = metric_kind(metric_id)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if metric_id.endswith("*") or metric_id == "cost_per_success":
        raise ValueError(f"{where}: {metric_id} is not a per-trial metric")
    return kind


class Support(_Strict):
    """The values a continuous metric can take in one trial, for bounding trials lost to infrastructure failures.

    ``low`` (default 0) and one upper end: ``high``, a number the metric cannot exceed (the per-trial token or cost
    cap the runner enforces, the agent timeout for time), or ``high_times_task_max``, that many times the largest
    value observed on the same task (either arm): an assumption the plan states before the data.
    """

    low: float = Field(default=0.0, ge=0)
    high: float | None = Field(default=None, gt=0)
    high_times_task_max: float | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_high(self) -> Support:
        if (self.high is None) == (self.high_times_task_max is None):
            raise ValueError("give one upper end: high (a cap, e.g. the per-trial budget or the timeout) or "
                             "high_times_task_max (a multiple of the largest value seen on the same task)")
        if self.high is not None and self.high <= self.low:
            raise ValueError(f"high ({self.high:g}) must be above low ({self.low:g})")
        return self

    def describe(self, metric_id: str) -> str:
        """The support in words: ``[0, 2,000,000]`` or ``[0, 3 x the task's largest observed value]``."""
        # Up to 15 significant digits: a cap of 5,000,000 tokens reads as such, not as 5e+06.
        top = f"{self.high:,.15g}" if self.high is not None else f"{self.high_times_task_max:g} x the task's largest observed value"
        return f"{metric_id} in [{self.low:,.15g}, {top}]"


class BesideItt(_Strict):
    """Estimands reported beside the planned comparisons by assignment (docs/analysis-plan.md).

    ``compliance``: the effect among trials that used MCP (CACE) and the naive users-vs-baseline
    comparison, for ``compliance_metrics`` (default: the primary tier's per-trial metrics);
    ``infrastructure_bounds``: worst- and best-case bounds of every primary comparison for the
    trials lost to infrastructure failures; ``support``: per continuous metric, the values a lost trial could
    have taken (:class:`Support`); without one, that metric's bounds are unbounded; ``divergence`` (exploratory):
    where the trajectories of
    discordant pairs first part ways; ``mediation`` (exploratory): the success and token effects
    decomposed through ``mediators``.
    """

    compliance: bool = True
    infrastructure_bounds: bool = True
    divergence: bool = True
    mediation: bool = False
    compliance_metrics: list[str] | None = None
    mediators: list[str] = Field(default_factory=lambda: list(MEDIATORS))
    mediation_outcomes: list[str] = Field(default_factory=lambda: list(MEDIATION_OUTCOMES))
    # Absent (None): no metric has a declared support, and the plan's hash is that of a plan without the key.
    support: dict[str, Support] | None = None

    @model_validator(mode="after")
    def _metrics_known(self) -> BesideItt:
        for key in ("compliance_metrics", "mediators", "mediation_outcomes"):
            for i, metric_id in enumerate(getattr(self, key) or []):
                _plain_metric(f"{key}[{i}]", metric_id)
        for metric_id in self.support or {}:
            if _plain_metric(f"support.{metric_id}", metric_id) == "binary":
                raise ValueError(f"support.{metric_id}: a pass/fail metric needs no support (a lost trial is bounded "
                                 "by failing and by passing)")
        for i, metric_id in enumerate(self.mediation_outcomes):
            if metric_kind(metric_id) == "continuous" and registry.metric(metric_id).scale not in ("ratio", "difference"):
                raise ValueError(f"mediation_outcomes[{i}]: {metric_id} has no comparison scale")
        return self

    def metrics_for_compliance(self, plan: AnalysisPlan) -> list[str]:
        """The metrics whose CACE is reported: as declared, else the primary tier's per-trial metrics."""
        if self.compliance_metrics is not None:
            return list(self.compliance_metrics)
        return [m.id for m in plan.tiers.primary.metrics if not m.id.endswith("*") and m.id != "cost_per_success"]


MeanTest = Literal["paired_t", "sign_flip"]
MEAN_TESTS: tuple[MeanTest, ...] = ("paired_t", "sign_flip")


class PartialCredit(_Strict):
    """The mean outcome a study that scores partial credit reports beside its pass/fail comparison
    (docs/analysis-plan.md): when the rewards of a profile pair are not all 0 or 1, the mean of ``metric`` per
    arm with its interval, and the paired mean difference B − A over tasks by each of ``tests`` (the paired t,
    and the sign-flip randomisation test that the paired design justifies). Described beside the tiers, with
    no correction and no verdict of its own. ``tests: []`` turns it off.
    """

    metric: str = "reward"
    tests: list[MeanTest] = Field(default_factory=lambda: list(MEAN_TESTS))

    @model_validator(mode="after")
    def _a_mean_outcome(self) -> PartialCredit:
        kind = _plain_metric("metric", self.metric)
        if kind != "continuous" or registry.metric(self.metric).scale != "difference":
            raise ValueError(f"metric: {self.metric} is not compared as a difference of means (use reward)")
        if len(set(self.tests)) != len(self.tests):
            raise ValueError("tests: each test once")
        return self


class Sequential(_Strict):
    """A group-sequential design of the primary tier (docs/sequential.md): when to look, how to spend alpha.

    ``looks``: the number of equally spaced looks, or their information fractions (the share of the
    scheduled tasks with every pair done, ``timing: tasks``; or the share of the phase budget's guardrail
    spent, ``timing: spend``). ``efficacy``: the Lan-DeMets spending function; ``futility``: a
    non-binding futility bound spending ``1 - power`` (or ``none``). ``stop``: ``all`` stops when every
    primary hypothesis is decided, ``any`` at the first rejection.
    """

    looks: list[float] | int = 4
    timing: Literal["tasks", "spend"] = "tasks"
    efficacy: Literal["obrien_fleming", "pocock"] = "obrien_fleming"
    futility: Literal["none", "obrien_fleming", "pocock"] = "none"
    power: float = Field(default=0.8, gt=0.5, lt=1)
    stop: Literal["all", "any"] = "all"

    @field_validator("looks", mode="before")
    @classmethod
    def _looks(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("looks: a number of looks (2 to 10) or a list of increasing fractions in (0, 1]")
        if isinstance(v, int):
            if not 2 <= v <= 10:
                raise ValueError(f"looks: between 2 and 10 looks, got {v}")
            return v
        if isinstance(v, list):
            f = [float(x) if isinstance(x, int | float) and not isinstance(x, bool) else x for x in v]
            if not all(isinstance(x, float) for x in f) or not 2 <= len(f) <= 10:
                raise ValueError("looks: 2 to 10 fractions, each a number in (0, 1]")
            if any(not 0 < x <= 1 for x in f) or any(b <= a for a, b in zip(f, f[1:], strict=False)):
                raise ValueError(f"looks: fractions must increase within (0, 1], got {v}")
            return f
        return v

    @model_validator(mode="after")
    def _last_look(self) -> Sequential:
        if self.timing == "tasks" and isinstance(self.looks, list) and self.looks[-1] != 1.0:
            raise ValueError(f"looks: with timing: tasks the last look is at 1.0 (every task), got {self.looks[-1]}")
        return self

    def fractions(self) -> list[float]:
        """The planned information fractions of the looks."""
        if isinstance(self.looks, int):
            return [k / self.looks for k in range(1, self.looks + 1)]
        return list(self.looks)


class AnalysisPlan(_Strict):
    """The validated plan (see params/analysis_plan.yaml for the meaning of every key)."""

    name: str
    alpha: float = Field(gt=0, lt=1)
    pairing: Pairing = Pairing()
    bootstrap: Bootstrap = Bootstrap()
    tiers: Tiers
    # A fixed sequence: each step is tested at alpha only if every step before it held.
    hypotheses: list[Hypothesis] = Field(default_factory=list)
    # Estimands beside intention to treat; absent: the defaults of BesideItt (and the plan's hash unchanged).
    beside_itt: BesideItt | None = None
    # Which family carries the claim: the primary tier or the hypotheses sequence (then required); the other
    # is supportive. Two confirmatory families, each at alpha, could together err at up to twice alpha.
    claim_family: Literal["primary", "hypotheses"] | None = None
    # Optional: interim looks at the primary tier with alpha spending (analysis_lib.inference.sequential).
    sequential: Sequential | None = None
    # The mean outcome beside pass/fail when rewards score partial credit; absent: the defaults of PartialCredit
    # (and the plan's hash unchanged).
    partial_credit: PartialCredit | None = None

    @model_validator(mode="after")
    def _tier_rules(self) -> AnalysisPlan:
        seen: dict[str, str] = {}
        for tier in TIERS:
            t: Tier = getattr(self.tiers, tier)
            for i, m in enumerate(t.metrics):
                where = f"tiers.{tier}.metrics[{i}]"
                if m.repetitions is not None:
                    raise ValueError(f"{where}.repetitions: only sensitivity analyses combine repetitions "
                                     "otherwise than pairing.repetitions")
                _check_test_fits_repetitions(where, m, self.pairing.repetitions)
                if tier == "exploratory" and m.test != "descriptive":
                    raise ValueError(f"{where}.test: exploratory metrics are described, not tested (use descriptive)")
                if tier != "exploratory" and m.test == "descriptive":
                    raise ValueError(f"{where}.test: a {tier} metric needs a formal test (mcnemar_exact, mcnemar_midp "
                                     "or wilcoxon_signed_rank)")
                if tier != "exploratory" and registry.metric(m.id).exploratory_only:
                    raise ValueError(f"{where}.id: {m.id} is exploratory by definition (README, Metric reference)")
                if m.id in seen:
                    raise ValueError(f"{where}.id: {m.id} is already planned in the {seen[m.id]} tier")
                seen[m.id] = tier
        if self.tiers.exploratory.correction != "none":
            raise ValueError("tiers.exploratory.correction: exploratory metrics have no p-values to correct (use none)")
        if self.sequential is not None and self.hypotheses:
            raise ValueError("sequential: a plan with fixed-sequence hypotheses has no sequential design here; "
                             "declare the hypotheses or the sequential section, not both")
        if self.hypotheses and self.claim_family is None:
            raise ValueError("claim_family: a plan with hypotheses must say which family carries its claim, the primary "
                             "tier or the hypotheses sequence (the other is then supportive)")
        if self.claim_family == "hypotheses" and not self.hypotheses:
            raise ValueError("claim_family: hypotheses, but the plan declares no hypotheses")
        if self.sequential is not None and any(m.test == "gee" for m in self.tiers.primary.metrics):
            raise ValueError("sequential: the GEE test has no sequential boundary here; use paired_t or sign_flip")
        sens = self.tiers.sensitivity
        if sens is not None:
            if sens.correction != "none":
                raise ValueError("tiers.sensitivity.correction: sensitivity analyses restate a planned test, they "
                                 "are not a family of their own (use none)")
            for i, m in enumerate(sens.metrics):
                where = f"tiers.sensitivity.metrics[{i}]"
                if seen.get(m.id) not in ("primary", "secondary"):
                    raise ValueError(f"{where}.id: {m.id} is not a primary or secondary metric of this plan")
                if m.test == "descriptive":
                    raise ValueError(f"{where}.test: a sensitivity analysis is a test (not descriptive)")
                _check_test_fits_repetitions(where, m, m.repetitions or self.pairing.repetitions)
        return self

    def beside(self) -> BesideItt:
        """What is reported beside intention to treat: the plan's ``beside_itt``, else the defaults."""
        return self.beside_itt if self.beside_itt is not None else BesideItt()

    def partial(self) -> PartialCredit:
        """The mean outcome reported beside pass/fail under partial credit: the plan's ``partial_credit``, else the defaults."""
        return self.partial_credit if self.partial_credit is not None else PartialCredit()

    @property
    def claim(self) -> str:
        """The family that carries the claim: ``primary`` (the default without hypotheses) or ``hypotheses``."""
        return self.claim_family or "primary"

    def tier_metrics(self) -> list[tuple[str, MetricSpec, Tier]]:
        tiers = TIERS + (("sensitivity",) if self.tiers.sensitivity is not None else ())
        return [(tier, m, getattr(self.tiers, tier)) for tier in tiers for m in getattr(self.tiers, tier).metrics]

    def repetitions_of(self, spec: MetricSpec) -> str:
        """How a planned row combines the repetitions of a task: its own (sensitivity) or the plan's."""
        return spec.repetitions or self.pairing.repetitions


def _check_test_fits_repetitions(where: str, m: MetricSpec, repetitions: str) -> None:
    if repetitions == "all" and m.test in MAJORITY_TESTS:
        raise ValueError(f"{where}.test: {m.test} compares majority verdicts; with repetitions: all use "
                         f"{', '.join(ALL_REPETITION_TESTS)}")
    if repetitions == "majority" and m.test in ALL_REPETITION_TESTS:
        raise ValueError(f"{where}.test: {m.test} compares per-task pass rates; it needs repetitions: all")


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
        root = Path(__file__).resolve().parents[2]
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
    return Path(__file__).resolve().parents[2] / PLAN_FILE


def load_plan(path: str | os.PathLike | None = None) -> AnalysisPlan:
    """Read and validate the plan file (default :func:`default_plan_path`); :class:`PlanError` says why not."""
    p = Path(path) if path is not None else default_plan_path()
    source = display_path(p)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc  # a decode error has no strerror
        raise PlanError(f"{source}: cannot read the analysis plan ({type(exc).__name__}: {reason})") from None
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
    """The validated plan as JSON data; unset optional keys (None) are left out, so diffs show only what is declared."""
    return plan.model_dump(mode="json", exclude_none=True) if isinstance(plan, AnalysisPlan) else plan


def plan_hash(plan: AnalysisPlan | dict) -> str:
    """sha256 of the canonical plan: the validated plan, defaults filled in, as JSON with sorted keys."""
    return hashlib.sha256(orjson.dumps(_canonical(plan), option=orjson.OPT_SORT_KEYS)).hexdigest()


def plan_yaml(plan: AnalysisPlan | dict) -> str:
    """The canonical plan as YAML with sorted keys (what the diffs compare)."""
    return yaml.safe_dump(_canonical(plan), sort_keys=True, default_flow_style=False, allow_unicode=True)


@dataclass
class PlanCheck:
    """The plan used by an analysis, the record it is compared with, and when that record was made."""

    plan: AnalysisPlan
    sha256: str
    source: str
    recorded: dict | None = None
    recorded_now: bool = False
    record_where: str = ""
    changed: bool = False
    diff: str = ""
    first_trial_at: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def short(self) -> str:
        return self.sha256[:12]

    @property
    def recorded_at(self) -> str | None:
        return (self.recorded or {}).get("recorded_at")

    @property
    def fixed_before_data(self) -> bool | None:
        """True when the record predates the first trial (a pre-registration); None when either time is unknown."""
        fixed, first = _when(self.recorded_at), _when(self.first_trial_at)
        return None if fixed is None or first is None else fixed <= first

    def note_first_trial(self, started_at) -> None:
        """Take the earliest trial start (ISO strings; missing ones ignored) to date the plan against the data."""
        times = sorted(t for t in (_when(x) for x in started_at) if t is not None)
        self.first_trial_at = _stamp(times[0]) if times else None

    def timing_line(self) -> str:
        """One sentence: when the plan was fixed, relative to the first trial (times to the minute, UTC)."""
        if self.recorded_at is None:
            return "The plan was not recorded; when it was fixed is unknown."
        where = f" in the {self.record_where}" if self.record_where else ""
        fixed, first = _when(self.recorded_at), _when(self.first_trial_at)
        if fixed is None or first is None:  # fixed_before_data is None
            return f"The plan was recorded{where} on {_minute(fixed)}; the start of the first trial is unknown."
        before = fixed <= first
        gap = _duration(abs(first - fixed))
        if before:
            return (f"The plan was fixed{where} on {_minute(fixed)}, {gap} before the first trial "
                    f"({_minute(first)}): it is a pre-registration.")
        return (f"The plan was recorded{where} on {_minute(fixed)}, {gap} after the first trial "
                f"({_minute(first)}): it is not a pre-registration.")

    def banner(self) -> list[str]:
        """Markdown lines for the very top of a report: the plan departure with its diff, and warnings."""
        out: list[str] = []
        if self.changed and self.recorded is not None:
            out += [f"> **plan changed after the plan record:** the plan recorded in the {self.record_where} on "
                    f"{self.recorded_at or '?'} (sha256 `{str(self.recorded.get('analysis_plan_sha256'))[:12]}`) "
                    f"differs from the plan used for this report (`{self.source}`, sha256 `{self.short}`). "
                    "Results below follow the changed plan; the deviations from the recorded one are:", "",
                    "```diff", self.diff.rstrip("\n"), "```", ""]
        if self.fixed_before_data is False:
            out += [f"> **plan fixed after the data:** {self.timing_line()}", ""]
        for w in self.warnings:
            out += [f"> **analysis plan warning:** {w}", ""]
        return out

    def hash_line(self) -> str:
        return f"Analysis plan: `{self.source}` ({self.plan.name}), sha256 `{self.sha256}`."

    @classmethod
    def unrecorded(cls, plan: AnalysisPlan, source: str = "(given)") -> PlanCheck:
        """A plan used without any record to compare it with (a table analysed in memory)."""
        return cls(plan, plan_hash(plan), source)

    def to_json(self) -> dict:
        """Everything this check holds, for the study's hand-off (:meth:`from_json` reads it back)."""
        return {"plan": self.plan.model_dump(mode="json"), "sha256": self.sha256, "source": self.source,
                "recorded": self.recorded, "recorded_now": self.recorded_now, "record_where": self.record_where,
                "changed": self.changed, "diff": self.diff, "first_trial_at": self.first_trial_at,
                "warnings": list(self.warnings)}

    @classmethod
    def from_json(cls, obj: dict) -> PlanCheck:
        return cls(parse_plan(obj["plan"], obj.get("source", "<plan>")), obj["sha256"], obj["source"], obj.get("recorded"),
                   bool(obj.get("recorded_now")), obj.get("record_where") or "", bool(obj.get("changed")),
                   obj.get("diff") or "", obj.get("first_trial_at"), list(obj.get("warnings") or []))

    def sidecar(self) -> dict:
        """What ``analysis_plan.json`` beside the outputs holds (the hash, the plan, the record state)."""
        return {"analysis_plan_sha256": self.sha256, "plan_name": self.plan.name, "plan_source": self.source,
                "plan": _canonical(self.plan), "recorded_sha256": (self.recorded or {}).get("analysis_plan_sha256"),
                "recorded_at": self.recorded_at, "recorded_in": self.record_where or None,
                "first_trial_at": self.first_trial_at, "fixed_before_first_trial": self.fixed_before_data,
                "plan_changed_after_record": self.changed, "warnings": self.warnings}


def _when(value) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC)


def _minute(t: datetime | None) -> str:
    """``2026-03-01 08:00 UTC``: what a reader needs, and no machine timestamp in a stored notebook output."""
    return t.strftime("%Y-%m-%d %H:%M UTC") if t is not None else "an unknown time"


def _stamp(t: datetime) -> str:
    return t.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _duration(d) -> str:
    minutes = int(d.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + [f"{mins} min"] * bool(mins and not days)
    return " ".join(parts) or "less than a minute"


def lock_path(folder: str | os.PathLike) -> Path:
    """The plan record of a folder: ``<folder>/analysis_plan.lock.json``; for a single results file
    (mcpbr, Inspect log), ``<file>.analysis_plan.lock.json`` beside it."""
    p = Path(folder)
    return p.with_name(p.name + "." + LOCK_NAME) if p.is_file() else p / LOCK_NAME


def plan_record(plan: AnalysisPlan, source: str, recorded_by: str, now: datetime | None = None) -> dict:
    """The JSON a plan record holds: hash, canonical plan, when and by what it was recorded."""
    return {"analysis_plan_sha256": plan_hash(plan), "plan_name": plan.name, "plan_source": source,
            "plan": _canonical(plan), "recorded_at": _stamp(now or datetime.now(UTC)),
            "recorded_by": recorded_by, "tool": "analysis_lib", "tool_version": __version__,
            "note": "Do not edit: analyses compare their plan with this record."}


def write_preregistration(runs_dir: str | os.PathLike, plan: AnalysisPlan, source: str,
                          now: datetime | None = None) -> Path | None:
    """The runner's pre-registration: the plan recorded in the run record before the first trial.

    Written once into the runs folder the runner itself creates; an existing record is kept (a resumed
    run keeps the date of its first start). Returns the path, or None when one was already there.
    """
    path = lock_path(runs_dir)
    if path.exists():
        return None
    return atomic_write_json(path, plan_record(plan, source, "runner, before the first trial", now))


def _read_record(path: Path) -> dict:
    rec = read_json(path, "plan")
    if not isinstance(rec, dict) or not isinstance(rec.get("analysis_plan_sha256"), str):
        raise InputError(str(path), "plan", "not an analysis plan record")
    return rec


def check_plan(runs_dir: str | os.PathLike, plan: AnalysisPlan, source: str = PLAN_FILE.as_posix(), *,
               out_dir: str | os.PathLike | None = None, record_path: str | os.PathLike | None = None,
               record: bool = True, now: datetime | None = None) -> PlanCheck:
    """Compare ``plan`` with its record; never write into the runs folder, which is read-only input.

    The record compared with is, first found: ``record_path`` (named by the user), the runner's
    pre-registration in the runs folder, the record in ``out_dir``. When there is none and ``record``
    is set, the plan is recorded in ``out_dir`` (once, atomically; never replaced). An unreadable or
    unwritable record is a warning, not an error.
    """
    check = PlanCheck(plan, plan_hash(plan), source)
    candidates = [(Path(record_path), "named plan record")] if record_path is not None else []
    candidates += [(lock_path(runs_dir), "run record")]
    if out_dir is not None:
        candidates.append((lock_path(out_dir), "output folder"))
    for path, where in candidates:
        if not path.exists():
            if where == "named plan record":
                raise PlanError(f"{display_path(path)}: plan record not found")
            continue
        try:
            rec = _read_record(path)
        except InputError as exc:
            check.warnings.append(f"{display_path(path)}: unreadable plan record, left as it is ({exc.error.message}); "
                                  "the plan cannot be compared with the recorded one")
            return check
        check.recorded, check.record_where = rec, where
        if rec["analysis_plan_sha256"] != check.sha256:
            check.changed = True
            old = rec.get("plan")
            if not isinstance(old, dict):
                old = {}
            check.diff = "".join(difflib.unified_diff(
                plan_yaml(old).splitlines(keepends=True), plan_yaml(plan).splitlines(keepends=True),
                fromfile=f"recorded plan ({rec.get('recorded_at', '?')})", tofile=f"{source} (this analysis)"))
        return check
    if not record or out_dir is None:
        return check
    rec = plan_record(plan, source, "first analysis into this output folder", now)
    lock = lock_path(out_dir)
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        atomic_write_json(lock, rec)
    except OSError as exc:
        check.warnings.append(f"{display_path(lock)}: plan record not written ({type(exc).__name__}: "
                              f"{exc.strerror or exc}); later changes of the plan cannot be detected")
        return check
    check.recorded, check.recorded_now, check.record_where = rec, True, "output folder"
    return check


SIDECAR_NAME = files.PLAN_SIDECAR


def write_sidecar(out_dir: str | os.PathLike, check: PlanCheck) -> Path:
    """``out_dir/analysis_plan.json``: the plan hash of every CSV written in that folder by the analysis."""
    return atomic_write_json(Path(out_dir) / SIDECAR_NAME, {
        **check.sidecar(), "covers": "every CSV file this analysis wrote in this folder (JSON and Markdown outputs "
                                     "carry the hash themselves)"})


# --------------------------------------------------------------------------- corrections
