"""The study, resolved once: every later stage is handed this object and decides none of it again.

A :class:`Study` is what a runs folder is under a study file and an analysis plan: the trials placed in
their arms (the trials table, ``metrics_detail.csv``), the success rule that scored them, the one
baseline with where it was declared, the plan checked against its record, the design audit, and, per
trial, where its tokens came from, whether it reached the model and the actions the divergence table
compares. :func:`open_study` builds it from the runs (the only place that reads them for the
analysis); :meth:`Study.save` and :meth:`Study.load` hand it from one notebook or command to the next
(``study.json`` beside the tables it names), much as a statsmodels results object carries everything
later steps need.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from ..core import outputs as files
from ..core.fileio import atomic_write_bytes, atomic_write_csv, atomic_write_json, read_json
from ..core.success import DEFAULT_SUCCESS
from ..core.trial import IngestError, InputError, Trial
from ..ingest.fingerprint import runs_changes, runs_fingerprint_sha256
from ..ingest.provenance import is_simulated
from ..metrics.actions import Action, TrialActions
from ..metrics.summary import aggregate_metrics, summary_frame
from ..metrics.tokens import TOKEN_COLUMNS, untrusted_tokens
from ..metrics.trial_metrics import DEFAULT_CONFIG, MetricsConfig
from ..metrics.trials_table import ACTIONS_COLUMN, read_trials_table, relative_to_runs, table_of_trials, trials_table
from .audit import DesignAudit, audit_from_frames, design_audit
from .baseline import Baseline, profile_pairs, resolve_baseline
from .configurations import (
    CONFIGURATION_AUDIT_COLUMNS,
    baseline_profiles,
    configuration_audit,
    configuration_moderators,
    configuration_pairs,
    configuration_task_pairs,
    has_configurations,
)
from .placement import RERUN_COLUMNS, load_placed_trials, placement
from .plan import AnalysisPlan, PlanCheck, PlanError, check_plan, display_path, load_plan
from .study_file import Source, StudyDesign, load_design

__all__ = ["Study", "StudyRecord", "StudyError", "open_study", "study_of_trials", "ERROR_COLUMNS", "FORMAT"]

ERROR_COLUMNS = ["path", "stage", "severity", "message"]
FORMAT = "analysis_lib.study/1"


class StudyError(ValueError):
    """A study that cannot be used for what was asked (no baseline, a saved study missing); one line."""


class StudyRecord(BaseModel):
    """``study.json``: the typed hand-off between notebooks and commands (the tables it names sit beside it)."""

    model_config = ConfigDict(extra="forbid")

    format: str = FORMAT
    runs_dir: str
    simulated: bool
    seed: int = 0
    study_file: str | None = None
    design: dict[str, Any] | None = None
    design_sha256: str | None = None
    success_rule: str = DEFAULT_SUCCESS
    baseline: str | None = None
    baseline_source: str
    arms: list[str]
    n_trials: int
    n_errors: int
    n_sources: int = 0
    cache_hits: int = 0
    plan: dict[str, Any] | None = None
    data_source: dict[str, Any] | None = None


@dataclass
class Study:
    """One study: its placed trials table and everything decided about it (module docstring)."""

    runs_dir: str  # as the user named it (relative), for reports and for reading the runs again
    metrics: pd.DataFrame  # the trials table: one row per trial, ``profile`` = its arm
    errors: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ERROR_COLUMNS))
    baseline: Baseline = field(default_factory=lambda: Baseline(None, "not resolved"))
    audit: DesignAudit | None = None
    design: StudyDesign | None = None
    design_path: str | None = None
    plan_check: PlanCheck | None = None
    reruns: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=RERUN_COLUMNS))
    simulated: bool = False
    seed: int = 0
    n_sources: int = 0
    cache_hits: int = 0
    # Trial path -> its action sequence (None: no trajectory), for the divergence of discordant trials.
    actions: Mapping[str, list[Action] | None] = field(default_factory=TrialActions)
    # Why no baseline could be chosen (a declared baseline that is not an arm), else None.
    baseline_error: str | None = None
    files: list[Path] = field(default_factory=list)
    # Where the runs were read from by this process (not saved: a loaded study finds them by ``runs_dir``).
    runs_location: Path | None = None
    # The runs folder's fingerprint when this process read it (ingest.fingerprint.runs_fingerprint); not saved (it
    # holds file times): the command that opened the study checks it again before committing its outputs.
    inputs: dict[str, str] | None = None

    # ----------------------------------------------------------------- what the study is

    @property
    def success_rule(self) -> str:
        """When a reward is a pass: the study file's rule, else a reward of exactly 1."""
        return self.design.success if self.design is not None else DEFAULT_SUCCESS

    @property
    def plan(self) -> AnalysisPlan | None:
        return self.plan_check.plan if self.plan_check is not None else None

    @property
    def source(self) -> Source | None:
        """Where real runs came from (the study file's ``source``), named in every report."""
        return self.design.source if self.design is not None else None

    @property
    def arms(self) -> list[str]:
        """The profiles the trials are placed in (with configurations: ``<configuration> / <arm>``)."""
        return sorted(self.metrics["profile"].dropna().astype(str).unique()) if len(self.metrics) else []

    @property
    def configurations(self) -> list[str]:
        """The configurations of a study whose study file declares them (each compares its own two arms); else []."""
        if not has_configurations(self.metrics, self.design):
            return []
        return sorted(self.metrics["configuration"].dropna().astype(str).unique())

    def configuration_pairs(self) -> dict[str, tuple[str, str]]:
        """Configuration -> (control profile, treatment profile), for configurations with trials in both arms."""
        if not self.configurations or self.design is None:
            return {}
        return configuration_pairs(self.metrics, self.design)

    def moderators(self) -> pd.DataFrame | None:
        """The study file's moderators, one row per configuration (for the meta-regression); None when undeclared."""
        if not self.configurations or self.design is None:
            return None
        return configuration_moderators(self.metrics, self.design)

    @property
    def baseline_profiles(self) -> list[str]:
        """The profiles every comparison is made against: the baseline, or each configuration's control arm."""
        if self.configurations and self.design is not None:
            return baseline_profiles(self.metrics, self.design)
        return [self.baseline.name] if self.baseline.name is not None else []

    @property
    def mcp_offered(self) -> dict[str, bool | None]:
        """Per arm: whether it was offered MCP tools (the study file's declaration, else the audit's reading)."""
        if self.audit is None or self.audit.arms.empty:
            return {}
        return {str(a): (None if pd.isna(v) else bool(v)) for a, v in zip(self.audit.arms["arm"], self.audit.arms["mcp_offered"],
                                                                          strict=True)}

    @functools.cached_property
    def token_exclusions(self) -> pd.DataFrame:
        """The trials whose token counts are not trusted (:func:`analysis_lib.metrics.tokens.untrusted_tokens`): arm,
        task, trial path and why. Their tokens and cost are left out of every table and comparison."""
        m = self.metrics
        if not len(m) or "token_source" not in m:
            return pd.DataFrame(columns=["profile", "task_id", "trial_path", "reason"])
        agents = m["agent_name"] if "agent_name" in m else pd.Series(None, index=m.index, dtype=object)
        reasons = pd.Series([untrusted_tokens(s, a) for s, a in zip(m["token_source"], agents, strict=True)], index=m.index)
        left = m.loc[reasons.notna(), ["profile", "task_id", "trial_path"]].assign(reason=reasons[reasons.notna()])
        return left.reset_index(drop=True)

    @functools.cached_property
    def trusted_metrics(self) -> pd.DataFrame:
        """The trials table every token and cost table and comparison reads: the token and cost cells of the trials
        in :attr:`token_exclusions` left empty (the one token policy), everything else as in :attr:`metrics`."""
        left = set(self.token_exclusions["trial_path"])
        if not left:
            return self.metrics
        out = self.metrics.copy()
        rows = out["trial_path"].isin(left)
        for col in TOKEN_COLUMNS:
            if col in out:
                out.loc[rows, col] = np.nan
        return out

    @functools.cached_property
    def summary(self) -> pd.DataFrame:
        """Per arm: counts, pass rate, means and medians (``metrics_summary.csv``), under the token policy."""
        out = summary_frame(self.trusted_metrics)
        out["simulated"] = self.simulated
        return out

    @functools.cached_property
    def aggregate(self) -> dict[str, Any]:
        """Per-arm aggregates with full tool distributions (``aggregate_metrics.json``)."""
        return aggregate_metrics(self.trusted_metrics, simulated=self.simulated, seed=self.seed, summary=self.summary)

    def require_baseline(self) -> str:
        """The baseline arm; :class:`StudyError` when none was resolved (nobody guesses one)."""
        if self.baseline.name is None:
            raise StudyError(self.baseline_error or f"no baseline: {self.baseline.source}")
        return self.baseline.name

    def pairs(self, compare: tuple[str, str] | None = None) -> list[tuple[str, str]]:
        """The (A, B) arm pairs the comparisons run: ``compare`` alone, each configuration's treatment against its
        control, or every arm against the baseline."""
        if compare is not None:
            return profile_pairs(self.arms, compare=compare)
        if self.configurations:
            self.require_baseline()
            return list(self.configuration_pairs().values())
        return profile_pairs(self.arms, baseline=self.require_baseline())

    def untestable(self) -> str | None:
        """Why no arm pair the plan could test remains (the design audit names a problem for every pair), else None."""
        problems = self.audit.problems() if self.audit is not None else []
        if self.baseline.name is None:
            return None
        pairs = self.pairs()
        if not pairs:
            return problems[0].message if problems else "no pair of arms to compare"
        return problems[0].message if len(problems) >= len(pairs) else None

    def line(self) -> str:
        """One line for a command's or notebook's header: what was analysed, under which design and baseline."""
        origin = f"study file {self.design_path}" if self.design_path else "the readers' default profiles"
        kind = "SIMULATED sample runs" if self.simulated else "real runs"
        within = f" in {len(self.configurations)} configurations" if self.configurations else ""
        return (f"{self.runs_dir} ({kind}): {len(self.metrics)} trials, {len(self.arms)} arms{within} ({origin}), "
                f"success: {self.success_rule}; {self.baseline.line()}")

    def inputs_changed(self) -> str | None:
        """One line saying how the runs folder changed since this process read it (gone, sources added, removed or
        changed), else None; None too for a study that was not read from runs here (loaded, or built in memory)."""
        if self.inputs is None or self.runs_location is None:
            return None
        return runs_changes(self.runs_location, self.inputs, self.runs_dir)

    @property
    def inputs_sha256(self) -> str | None:
        """One hash of the runs folder's fingerprint when it was read (for an output set's manifest)."""
        return runs_fingerprint_sha256(self.inputs) if self.inputs is not None else None

    # ----------------------------------------------------------------- reading the trials again

    def runs_path(self, root: str | os.PathLike = ".") -> Path:
        """The runs folder: where this process read it, else ``runs_dir`` taken relative to ``root`` (the project
        folder for notebooks)."""
        if self.runs_location is not None:
            return self.runs_location
        p = Path(self.runs_dir)
        return p if p.is_absolute() else Path(root) / p

    def load_trials(self, trial_paths: list[str] | None = None, *, root: str | os.PathLike = ".",
                    ) -> tuple[list[Trial], list[IngestError]]:
        """The full trials (trajectories in memory) of this study's table, named as the table names them (arm,
        task, repetition); ``trial_paths`` (as in the table): only those. For the judge, the explorer, labelling
        and the CodeCanvas views, which need what a row does not keep."""
        runs = self.runs_path(root)
        folder = runs if runs.is_dir() else runs.parent
        table = self.metrics
        if trial_paths is not None:
            table = table[table["trial_path"].isin(set(trial_paths))]
        wanted = {str(p): r for p, r in zip(table["trial_path"], table[["profile", "task_id", "repetition"]].itertuples(index=False),
                                            strict=True)}
        trials, errors = load_placed_trials(runs, None, [os.path.join(folder, p) for p in wanted])
        out = []
        for t in trials:
            row = wanted.get(relative_to_runs(t.trial_path, runs))
            if row is None:
                continue
            t.profile, t.task_id, t.repetition = str(row.profile), str(row.task_id), int(row.repetition)
            out.append(t)
        order = {p: i for i, p in enumerate(wanted)}
        out.sort(key=lambda t: order.get(relative_to_runs(t.trial_path, runs), len(order)))
        return out, errors

    # ----------------------------------------------------------------- the hand-off

    def record(self) -> StudyRecord:
        return StudyRecord(
            runs_dir=self.runs_dir, simulated=self.simulated, seed=self.seed, study_file=self.design_path,
            design=self.design.model_dump(mode="json") if self.design is not None else None,
            design_sha256=self.design.sha256() if self.design is not None else None, success_rule=self.success_rule,
            baseline=self.baseline.name, baseline_source=self.baseline_error or self.baseline.source, arms=self.arms,
            n_trials=len(self.metrics), n_errors=len(self.errors), n_sources=self.n_sources, cache_hits=self.cache_hits,
            plan=self.plan_check.to_json() if self.plan_check is not None else None,
            data_source=self.source.model_dump(mode="json") if self.source is not None else None)

    def save(self, folder: str | os.PathLike) -> list[Path]:
        """Write the study into ``folder``: ``study.json`` and the tables it names (trials, errors, reruns, actions,
        the design audit), each atomically. :meth:`load` reads exactly these."""
        out = Path(folder)
        written = [
            atomic_write_csv(out / files.METRICS_DETAIL, self.metrics.drop(columns=[ACTIONS_COLUMN], errors="ignore")),
            atomic_write_csv(out / files.ERRORS, self.errors),
            atomic_write_csv(out / files.RERUNS, self.reruns),
            atomic_write_bytes(out / files.ACTIONS, _actions_json(self.actions)),
        ]
        audit = self.audit
        findings = pd.DataFrame([(f.severity, f.check, f.message) for f in audit.findings] if audit else [],
                                columns=AUDIT_FINDING_COLUMNS)
        arms = audit.arms.copy() if audit is not None else pd.DataFrame()
        if len(arms):
            arms.insert(int(arms.columns.get_loc("arm")) + 1, "baseline", audit.baseline_column())
        written += [atomic_write_csv(out / files.DESIGN_AUDIT, arms), atomic_write_csv(out / files.DESIGN_FINDINGS, findings)]
        if audit is not None and audit.configurations is not None:
            written.append(atomic_write_csv(out / files.DESIGN_CONFIGURATIONS, audit.configurations))
        # study.json last: a folder whose record is present holds every table it names.
        written.append(atomic_write_json(out / files.STUDY, self.record().model_dump(mode="json")))
        return written

    @classmethod
    def load(cls, folder: str | os.PathLike) -> Study:
        """The study :meth:`save` wrote into ``folder``; :class:`StudyError` naming the file when it is missing."""
        out = Path(folder)
        path = out / files.STUDY
        if not path.exists():
            raise StudyError(f"{display_path(path)} is missing: open the study first (notebook 01, or "
                             "`python -m analysis_lib RUNS_DIR -o FOLDER`)")
        try:
            rec = StudyRecord.model_validate(read_json(path, stage="study"))
        except InputError as exc:
            raise StudyError(str(exc)) from None
        except ValueError as exc:
            raise StudyError(f"{display_path(path)}: not a study record ({str(exc).splitlines()[0]})") from None
        metrics = read_trials_table(out / files.METRICS_DETAIL)
        errors = pd.read_csv(out / files.ERRORS) if (out / files.ERRORS).exists() else pd.DataFrame(columns=ERROR_COLUMNS)
        reruns = pd.read_csv(out / files.RERUNS) if (out / files.RERUNS).exists() else pd.DataFrame(columns=RERUN_COLUMNS)
        design = StudyDesign.model_validate(rec.design) if rec.design is not None else None
        baseline = Baseline(rec.baseline, rec.baseline_source)
        audit = None
        if (out / files.DESIGN_AUDIT).exists():
            arms = pd.read_csv(out / files.DESIGN_AUDIT).drop(columns=["baseline"], errors="ignore")
            findings = pd.read_csv(out / files.DESIGN_FINDINGS) if (out / files.DESIGN_FINDINGS).exists() else None
            audit = audit_from_frames(arms, findings, metrics, baseline=rec.baseline, design=design)
            if has_configurations(metrics, design) and design is not None:
                table = out / files.DESIGN_CONFIGURATIONS
                audit.pairs = configuration_task_pairs(metrics, design)
                audit.baselines = baseline_profiles(metrics, design)
                audit.configurations = (pd.read_csv(table, dtype={"configuration": "object"}) if table.exists() else
                                        pd.DataFrame(columns=CONFIGURATION_AUDIT_COLUMNS))
        actions = TrialActions(read_json(out / files.ACTIONS, stage="study") if (out / files.ACTIONS).exists() else None)
        return cls(rec.runs_dir, metrics, errors, baseline, audit, design, rec.study_file,
                   PlanCheck.from_json(rec.plan) if rec.plan is not None else None, reruns, rec.simulated, rec.seed,
                   rec.n_sources, rec.cache_hits, actions, None if rec.baseline is not None else rec.baseline_source)

    # ----------------------------------------------------------------- a table already in memory

    @classmethod
    def from_table(cls, metrics: pd.DataFrame, *, baseline: str | None = None, plan: AnalysisPlan | PlanCheck | None = None,
                   simulated: bool | None = None, design: StudyDesign | None = None, runs_dir: str = "(in memory)") -> Study:
        """A study of a trials table already built (tests, a notebook's own frame): the baseline resolved by the
        one rule (explicit, the plan's, the design's, else the first arm), the audit computed, no runs folder.
        ``plan``: the plan, or a plan already checked against its record."""
        arms = metrics["profile"].dropna().astype(str) if len(metrics) else []
        check = plan if isinstance(plan, PlanCheck) else PlanCheck.unrecorded(plan) if plan is not None else None
        study = cls(runs_dir, metrics, design=design,
                    simulated=bool(metrics["simulated"].any()) if simulated is None and "simulated" in metrics else bool(simulated),
                    plan_check=check)
        if has_configurations(metrics, design):
            arms = metrics["arm"].dropna().astype(str)  # the baseline is the control arm of every configuration
        try:
            study.baseline = resolve_baseline(arms, explicit=baseline, plan=study.plan, design=design)
        except ValueError as exc:
            study.baseline_error = str(exc)
        study.audit = _audit(study)
        return study


AUDIT_FINDING_COLUMNS = ["severity", "check", "message"]


def open_study(
    runs_dir: str | os.PathLike,
    study: StudyDesign | str | os.PathLike | None = None,
    plan: str | os.PathLike | AnalysisPlan | None = None,
    baseline: str | None = None,
    *,
    plan_check: PlanCheck | None = None,
    out_dir: str | os.PathLike | None = None,
    runs_label: str | None = None,
    tasks: list[str] | None = None,
    profiles: list[str] | None = None,
    outcome: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    config: MetricsConfig = DEFAULT_CONFIG,
    cache_dir: str | os.PathLike | None = None,
    workers: int | None = None,
    progress: bool = False,
) -> Study:
    """Read ``runs_dir`` once and resolve its study: arms, success rule, plan check, baseline, audit.

    ``study``: a study file (path or parsed) that forms the arms, declares the success rule and may name the
    baseline; ``plan``: the analysis plan (path or parsed; default ``params/analysis_plan.yaml``), checked
    against its record (recorded in ``out_dir`` when none exists), or ``plan_check``, a plan already checked
    (RESULTS.md checks it against a named record); ``baseline``: chosen explicitly, else
    :func:`analysis_lib.study.baseline.resolve_baseline`'s rule. ``runs_label``: how outputs name the runs
    (default: the path as given, relative). ``outcome`` is ``"succeeded"``, ``"failed"`` or None; ``limit``
    draws a seeded random sample of that many trials. ``cache_dir``: the per-trial metrics cache (None: none).
    Raises :class:`~analysis_lib.study.study_file.DesignError` for a study file that cannot be used.
    """
    design, design_path = _design(study)
    if design is not None:
        config = replace(config, success_rule=design.success)
    table = trials_table(runs_dir, tasks=tasks, profiles=profiles, outcome=outcome, limit=limit, seed=seed, config=config,
                         cache_dir=cache_dir, workers=workers, progress=progress,
                         place=placement(design) if design is not None else None)
    errors = pd.DataFrame([(_error_path(e.path, runs_dir), e.stage, e.severity, e.message) for e in table.errors],
                          columns=ERROR_COLUMNS)
    result = Study(runs_label or display_path(runs_dir), table.frame, errors, design=design, design_path=design_path,
                   reruns=pd.DataFrame(table.reruns, columns=RERUN_COLUMNS), simulated=table.simulated, seed=seed,
                   n_sources=table.n_sources, cache_hits=table.cache_hits, runs_location=Path(runs_dir),
                   inputs=table.inputs)
    return _resolve(result, runs_dir, out_dir, plan, plan_check, baseline)


def study_of_trials(runs_dir: str | os.PathLike, study: StudyDesign | str | os.PathLike | None = None,
                    plan: str | os.PathLike | AnalysisPlan | None = None, baseline: str | None = None, *,
                    config: MetricsConfig = DEFAULT_CONFIG) -> tuple[Study, list[Trial]]:
    """The study of ``runs_dir`` with its trials loaded whole (trajectories in memory), from one read of the runs:
    for the explorer and the labelling notebook, which show what a row does not keep. The table's trial paths are
    the trials' own, so that rows and trials join; arguments as :func:`open_study`'s."""
    design, design_path = _design(study)
    if design is not None:
        config = replace(config, success_rule=design.success)
    trials, ingest_errors = load_placed_trials(runs_dir, design)
    frame = table_of_trials(trials, config)
    if design is not None and design.configurations is not None and len(frame):
        # Each trial carries the configuration and arm it was placed in; the table's rows are sorted, joined by path.
        placed = {t.trial_path: t.metadata.get("placement") or {} for t in trials}
        for col in ("configuration", "arm"):
            frame[col] = [placed.get(p, {}).get(col) for p in frame["trial_path"]]
    errors = pd.DataFrame([(_error_path(e.path, runs_dir), e.stage, e.severity, e.message) for e in ingest_errors],
                          columns=ERROR_COLUMNS)
    simulated = is_simulated(runs_dir)
    frame["simulated"] = simulated
    result = Study(display_path(runs_dir), frame, errors, design=design, design_path=design_path, simulated=simulated,
                   n_sources=len(trials), runs_location=Path(runs_dir))
    return _resolve(result, runs_dir, None, plan, None, baseline), trials


def _design(study: StudyDesign | str | os.PathLike | None) -> tuple[StudyDesign | None, str | None]:
    """The study file parsed (once), and how outputs name it."""
    if study is None or isinstance(study, StudyDesign):
        return study, None
    return load_design(study), display_path(study)


def _resolve(result: Study, runs_dir: str | os.PathLike, out_dir: str | os.PathLike | None,
             plan: str | os.PathLike | AnalysisPlan | None, plan_check: PlanCheck | None, baseline: str | None) -> Study:
    """What a study decides once its table is built: simulated or not, the plan check, the baseline, the audit."""
    df = result.metrics
    if ACTIONS_COLUMN in df:
        result.actions = TrialActions(dict(zip(map(str, df["trial_path"]), df.pop(ACTIONS_COLUMN), strict=True)))
    result.simulated = result.simulated or bool(result.design is not None and result.design.simulated)
    df["simulated"] = result.simulated
    result.plan_check = plan_check if plan_check is not None else _plan_check(runs_dir, out_dir, plan)
    if result.plan_check is not None and "started_at" in df:
        result.plan_check.note_first_trial(df["started_at"].dropna().tolist())
    # With configurations, the baseline is the control arm of every configuration.
    column = "arm" if has_configurations(df, result.design) else "profile"
    try:
        result.baseline = resolve_baseline(df[column].dropna().astype(str) if len(df) else [], explicit=baseline,
                                           plan=result.plan, design=result.design, runs_dir=runs_dir)
    except ValueError as exc:
        result.baseline_error = str(exc)
    result.audit = _audit(result)
    return result


def _audit(study: Study) -> DesignAudit:
    """The design audit of the study: within each configuration when it has them."""
    if study.design is not None and has_configurations(study.metrics, study.design):
        return configuration_audit(study.metrics, design=study.design, reruns=study.reruns, errors=study.errors)
    return design_audit(study.metrics, baseline=study.baseline.name, design=study.design, reruns=study.reruns,
                        errors=study.errors)


def _actions_json(actions: Mapping[str, list[Action] | None]) -> bytes:
    """``trial_actions.json`` of a study's actions, whether kept encoded or given as sequences."""
    if not isinstance(actions, TrialActions):
        actions = TrialActions({p: None if a is None else [[x.name, x.target, x.mcp] for x in a] for p, a in actions.items()})
    return actions.to_json()


def _error_path(path: str, runs_dir: str | os.PathLike) -> str:
    """Where an error was met, relative to the runs folder; the runs folder itself as the user named it."""
    rel = relative_to_runs(path, runs_dir)
    if rel not in (".", ""):
        return rel
    given = os.fspath(runs_dir)
    # "." says nothing in a report read elsewhere, an absolute path is this machine's: the folder's own name then.
    return os.path.basename(os.path.abspath(given)) if os.path.isabs(given) or given.rstrip("/") in (".", "") else given


def _plan_check(runs_dir: str | os.PathLike, out_dir: str | os.PathLike | None,
                plan: str | os.PathLike | AnalysisPlan | None) -> PlanCheck | None:
    """The analysis plan checked against its record (recorded in ``out_dir`` when there is none); None with one
    warning line when the plan cannot be read, so that Layer 1 still runs."""
    try:
        if isinstance(plan, AnalysisPlan):
            return check_plan(runs_dir, plan, "(given)", out_dir=out_dir, record=out_dir is not None)
        loaded = load_plan(plan)
        if plan is None:
            return check_plan(runs_dir, loaded, out_dir=out_dir, record=out_dir is not None)
        return check_plan(runs_dir, loaded, display_path(plan), out_dir=out_dir, record=out_dir is not None)
    except PlanError as exc:
        print(f"warning: {exc}; outputs carry no plan hash", file=sys.stderr)
        return None
