"""Human labels of the project's own trials: a stratified, seeded, blinded sample shown to people.

``draw_sample`` picks up to n trials per (profile, outcome) stratum with a seed and shuffles them,
so a rater sees neither the arm nor the arms in blocks. ``label_items`` shows each condensed,
arm-blinded trajectory in the terminal and records one label per analysis into a CSV
(``trial_id,analysis,rater,label``) that resumes where it stopped; the notebook ``label.ipynb``
does the same with widgets. ``labelling_report`` gives the agreement of two raters (the ceiling
for any judge) before the judge's agreement with each of them.
"""

from __future__ import annotations

import csv
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..core.trial import InputError, Trial
from .agreement import agreement_row, format_agreement_md
from .analyses import mcp_calls, outcome_text, trial_id, trial_success
from .blind import Blinder, vocabulary
from .class_order import CLASSES, seeded_shuffle
from .condense import condense
from .run import load_layer2_outputs
from .schemas import LABEL_FIELDS

# What a person labels per analysis: the classes of the judge's categorical field, described.
LABEL_CLASSES: dict[str, dict[str, str]] = {
    "strategy": CLASSES["strategy"],
    "failure": CLASSES["failure"],
    "mcp": {
        "early": "MCP tools used within the first quarter of the steps",
        "late": "MCP tools first used only afterwards",
        "never": "no MCP tool used to any effect",
    },
}
CSV_COLUMNS = ["trial_id", "analysis", "rater", "label"]


@dataclass
class LabelItem:
    """One trial to label: its id (for the CSV), the blinded text a person reads, the analyses that apply."""

    trial_id: str
    text: str
    analyses: list[str]


def outcome_of(trial: Trial, rows: Mapping[str, dict]) -> str:
    """Stratum outcome: success, failure or unknown, as the study's trials table scored the trial (``rows``: its rows
    by trial path, :func:`study_rows`)."""
    s = trial_success(trial, rows.get(trial.trial_path))
    return "unknown" if s is None else "success" if s else "failure"


def study_rows(metrics: pd.DataFrame) -> dict[str, dict]:
    """The trials table's verdict columns by trial path: what labelling reads of the study's success rule."""
    cols = [c for c in ("success", "infra_error") if c in metrics]
    return {str(p): {c: (None if pd.isna(v) else v) for c, v in zip(cols, vals, strict=True)}
            for p, *vals in metrics[["trial_path", *cols]].itertuples(index=False)}


def draw_sample(trials: list[Trial], rows: Mapping[str, dict], per_stratum: int = 2, seed: int = 0) -> list[Trial]:
    """Up to ``per_stratum`` trials with a trajectory from each (profile, outcome), seeded, in shuffled order."""
    strata: dict[tuple[str, str], list[Trial]] = defaultdict(list)
    for t in sorted(trials, key=trial_id):
        if t.trajectory is not None and t.trajectory.steps:
            strata[(t.profile, outcome_of(t, rows))].append(t)
    rng = random.Random(seed)
    picked = [t for key in sorted(strata) for t in rng.sample(strata[key], min(per_stratum, len(strata[key])))]
    rng.shuffle(picked)
    return picked


def applicable(trial: Trial, row: dict | None) -> list[str]:
    """Analyses a person can label for this trial: strategy always, failure when failed, mcp when MCP was called."""
    out = ["strategy"]
    if trial_success(trial, row) is False:
        out.append("failure")
    if mcp_calls(trial):
        out.append("mcp")
    return out


def make_items(sample: list[Trial], rows: Mapping[str, dict], all_trials: Iterable[Trial] | None = None,
               max_chars: int = 6000) -> list[LabelItem]:
    """The blinded views of ``sample`` (names to hide are collected from ``all_trials``, default the sample); ``rows``:
    the study's verdicts by trial path (:func:`study_rows`)."""
    vocab = vocabulary(list(all_trials) if all_trials is not None else sample)
    items = []
    for t in sample:
        b = Blinder(vocab)
        c = condense(t.trajectory, max_chars=max_chars)
        head = f"Task: {b.text(t.task_id)}\nOutcome: {outcome_text(t, rows.get(t.trial_path))}\nSteps: {c.shown_steps} of {c.total_steps} shown\n"
        items.append(LabelItem(trial_id(t), head + "\n" + b.text(c.text), applicable(t, rows.get(t.trial_path))))
    return items


def read_label_csv(path: str | Path) -> pd.DataFrame:
    """The labels recorded so far (empty frame when the file does not exist); InputError naming a malformed file."""
    p = Path(path)
    if not p.exists():
        return pd.DataFrame(columns=CSV_COLUMNS)
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(str(p), "labels", f"not a readable CSV ({type(exc).__name__})") from None
    missing = set(CSV_COLUMNS) - set(df.columns)
    if missing:
        raise InputError(str(p), "labels", f"needs columns {', '.join(CSV_COLUMNS)}; missing {', '.join(sorted(missing))}")
    return df[CSV_COLUMNS]


def append_label(path: str | Path, trial: str, analysis: str, rater: str, label: str) -> None:
    """Add one row to the label CSV (header written with the first row), flushed at once."""
    p = Path(path)
    new = not p.exists() or p.stat().st_size == 0
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(CSV_COLUMNS)
        w.writerow([trial, analysis, rater, label])


def choices(analysis: str, item_id: str, seed: int = 0) -> list[str]:
    """The classes offered to a person, in a seeded order per trial (people have order effects too)."""
    return seeded_shuffle(list(LABEL_CLASSES[analysis]), f"{analysis}|human|{item_id}|{seed}")


def label_items(items: list[LabelItem], rater: str, csv_path: str | Path, analyses: Iterable[str] = ("strategy", "failure", "mcp"),
                ask: Callable[[str], str] = input, say: Callable[[str], None] = print, seed: int = 0) -> int:
    """Terminal labelling: for each item and analysis, show the choices and record the answer.

    Answers: the number or name of a class, ``s`` to skip, ``q`` to stop (labels so far are kept).
    Pairs this rater already labelled are not asked again. Returns the number of labels recorded.
    """
    done = {(r.trial_id, r.analysis) for r in read_label_csv(csv_path).itertuples() if r.rater == rater}
    wanted = set(analyses)
    recorded = 0
    for n, item in enumerate(items, 1):
        todo = [a for a in item.analyses if a in wanted and (item.trial_id, a) not in done]
        if not todo:
            continue
        say(f"\n=== trial {n} of {len(items)} ===\n{item.text}")
        for analysis in todo:
            opts = choices(analysis, item.trial_id, seed)
            say(f"\n[{analysis}] {LABEL_FIELDS[analysis]}:")
            for i, name in enumerate(opts, 1):
                say(f"  {i}. {name}: {LABEL_CLASSES[analysis][name]}")
            while True:
                try:
                    answer = ask(f"{analysis} (1-{len(opts)}, s skip, q quit)> ").strip()
                except EOFError:
                    return recorded
                if answer == "q":
                    return recorded
                if answer == "s":
                    break
                label = opts[int(answer) - 1] if answer.isdigit() and 1 <= int(answer) <= len(opts) else answer if answer in opts else None
                if label is None:
                    say(f"  not a choice: {answer!r}")
                    continue
                append_label(csv_path, item.trial_id, analysis, rater, label)
                recorded += 1
                break
    return recorded


def human_pairs(labels: pd.DataFrame, analysis: str) -> tuple[list[str], pd.DataFrame]:
    """Raters of ``analysis`` (sorted) and a trial x rater frame of their labels (last answer wins)."""
    sub = labels[labels["analysis"] == analysis]
    wide = sub.drop_duplicates(["trial_id", "rater"], keep="last").pivot(index="trial_id", columns="rater", values="label")
    return sorted(wide.columns), wide


def judge_labels(layer2_dir: str | Path, analysis: str) -> dict[str, str | None]:
    """trial_id -> the judge's label in a Layer 2 output folder (None for a failed judgement)."""
    out = load_layer2_outputs(layer2_dir).get(analysis) or {}
    field = LABEL_FIELDS[analysis]
    return {r["trial_id"]: ((r.get("result") or {}).get(field) if r.get("ok") else None) for r in out.get("records", [])}


def labelling_report(csv_path: str | Path, layer2_dir: str | Path | None = None, reps: int = 1000, seed: int = 0) -> str:
    """Markdown: per analysis, inter-human agreement (the judge's ceiling), then judge vs each rater."""
    labels = read_label_csv(csv_path)
    rows = []
    for analysis in LABEL_CLASSES:
        raters, wide = human_pairs(labels, analysis)
        if wide.empty:
            continue
        name = f"{analysis} ({LABEL_FIELDS[analysis]})"
        clean = wide.where(wide.notna(), None)
        if len(raters) >= 2:
            a, b = raters[:2]
            rows.append(agreement_row(name, f"human {a} vs human {b} (ceiling)", clean[a].tolist(), clean[b].tolist(), reps, seed))
        if layer2_dir is not None:
            judge = judge_labels(layer2_dir, analysis)
            for r in raters:
                ids = [t for t in clean.index if clean.at[t, r] is not None and t in judge]
                if ids:
                    rows.append(agreement_row(name, f"judge vs human {r}", [judge[t] for t in ids], [clean.at[t, r] for t in ids], reps, seed))
    if not rows:
        return "No labels recorded yet."
    return "Inter-human agreement first: it is the ceiling a judge can be held to.\n\n" + format_agreement_md(rows)
