"""Human labels for judge agreement: a CSV of our own, TRAIL (SWE-bench) and Who&When.

TRAIL (Deshpande et al. 2025, patronus-ai/trail-benchmark) labels every error of a trace with a
category of its taxonomy; Who&When (Zhang et al. 2025, ICML) gives each failed run one free-text
``mistake_reason``. Neither uses our root-cause classes, so both are mapped here, and the
mappings are part of what an agreement figure means: read them before quoting one.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.fileio import read_bytes, read_json
from ..core.trial import InputError, Step, Trajectory, Trial

# TRAIL category -> our root cause. Decisions: "Resource Abuse" in TRAIL is repeated or excessive
# tool use, our infinite_loop; "Language-only" is a hallucination, our knowledge_gap; formatting and
# orchestration errors are a right plan carried out badly; "Resource Exhaustion" ends the run early.
TRAIL_TO_ROOT_CAUSE = {
    "instruction non-compliance": "misunderstood_task",
    "goal deviation": "misunderstood_task",
    "incorrect problem identification": "misunderstood_task",
    "formatting errors": "correct_approach_poor_execution",
    "task orchestration": "correct_approach_poor_execution",
    "context handling failures": "context_loss",
    "incorrect memory usage": "context_loss",
    "resource abuse": "infinite_loop",
    "resource exhaustion": "premature_termination",
    "poor information retrieval": "incomplete_exploration",
    "language-only": "knowledge_gap",
    "tool-related": "tool_misuse",
    "tool output misinterpretation": "tool_misuse",
}
_IMPACT_RANK = {"HIGH": 3, "MEDIUM": 2, "LOW": 1}

# Who&When mistake_reason (abridged in SOURCES.md sec. 16b) -> our root cause, by file, read by hand.
WHO_AND_WHEN_ROOT_CAUSE = {
    "Algorithm-Generated/70.json": "misunderstood_task",  # misunderstood the problem
    "Algorithm-Generated/76.json": "infinite_loop",  # buggy code repeatedly until the step limit
    "Algorithm-Generated/125.json": "incomplete_exploration",  # assumed the schedule, no verification
    "Algorithm-Generated/7.json": "knowledge_gap",  # assumed a PDF was accessible
    "Algorithm-Generated/6.json": "tool_misuse",  # wrong tool (arxiv_search vs web search)
    "Algorithm-Generated/13.json": "knowledge_gap",  # fabricated website content
    "Algorithm-Generated/1.json": "correct_approach_poor_execution",  # code missed edge cases
    "Hand-Crafted/1.json": "tool_misuse",  # clicked an irrelevant site
    "Hand-Crafted/4.json": "incomplete_exploration",  # relied on search snippets, did not verify
    "Hand-Crafted/6.json": "incomplete_exploration",  # did not verify the information
    "Hand-Crafted/47.json": "correct_approach_poor_execution",  # wrote incorrect code
}


def normalise_trail_category(raw: str) -> str:
    """Merge TRAIL's spelling variants ('Formatting Error', 'Language-Only', 'Instruction non complience'...)."""
    s = " ".join(raw.lower().replace("_", " ").split())
    s = s.replace("complience", "compliance").replace("non compliance", "non-compliance")
    s = re.sub(r"\berror\b$", "errors", s) if s.startswith("formatting") else s
    s = re.sub(r" errors?$", "", s) if s.startswith("task orchestration") else s
    if s.startswith("context handling"):
        s = "context handling failures"
    if s.startswith("tool-related") or s == "tool related":
        s = "tool-related"
    return s


def trail_root_cause(errors: list[dict[str, Any]]) -> str | None:
    """One root cause for a TRAIL trace: the mapped category of its highest-impact error.

    Ties go to the first error listed (the annotators' order, which follows the trace); None when
    the trace has no error (a negative control) or no error maps to our classes.
    """
    best, best_rank = None, 0
    for err in errors:
        mapped = TRAIL_TO_ROOT_CAUSE.get(normalise_trail_category(str(err.get("category", ""))))
        rank = _IMPACT_RANK.get(str(err.get("impact", "")).upper(), 0)
        if mapped and rank > best_rank:
            best, best_rank = mapped, rank
    return best


@dataclass
class LabelledTrace:
    """A trace converted to a Trial, with the human label mapped to our root causes."""

    trial: Trial
    human_root_cause: str | None
    raw_labels: list[str] = field(default_factory=list)
    source: str = ""


def _walk(spans: list[dict]):
    for s in spans:
        yield s
        yield from _walk(s.get("child_spans") or [])


def _llm_output(span: dict) -> str:
    attrs = span.get("span_attributes") or {}
    for key in ("llm.output_messages.0.message.content", "output.value"):
        v = attrs.get(key)
        if isinstance(v, str) and v:
            if key == "output.value" and v.lstrip().startswith("{"):
                try:
                    obj = json.loads(v)
                    if isinstance(obj, dict) and isinstance(obj.get("content"), str):
                        return obj["content"]
                except ValueError:
                    pass
            return v
    return ""


def trail_trace_to_trial(path: str | Path) -> Trial:
    """Convert a TRAIL OpenInference trace (smolagents CodeAgent) to a Trial.

    Each ``Step N`` CHAIN span becomes agent step N: its LLM child's answer is the message, the
    step's execution log the observation. The task prompt is step 0. ``extra['span_ids']`` keeps
    the span ids of the step, so a label's ``location`` can be placed on a step.
    """
    obj = read_json(path, stage="trail")
    if not isinstance(obj, dict) or not isinstance(obj.get("spans"), list):
        raise InputError(str(path), "trail", "not a TRAIL trace (no 'spans' list)")
    spans = list(_walk(obj["spans"]))
    steps: list[Step] = []
    task = ""
    for s in spans:
        attrs = s.get("span_attributes") or {}
        if attrs.get("openinference.span.kind") == "AGENT" and not task:
            task = str(attrs.get("input.value") or "")
    if task:
        steps.append(Step(step_id=0, source="user", message=task))
    seen: set[str] = set()
    for s in spans:
        name = str(s.get("span_name", ""))
        m = re.fullmatch(r"Step (\d+)", name)
        if not m or s.get("span_id") in seen:
            continue
        seen.add(s["span_id"])
        children = s.get("child_spans") or []
        llm = next((c for c in children if (c.get("span_attributes") or {}).get("openinference.span.kind") == "LLM"), None)
        message = _llm_output(llm) if llm else ""
        obs = str((s.get("span_attributes") or {}).get("output.value") or "")
        ids = [s["span_id"]] + [c.get("span_id") for c in children]
        steps.append(Step(step_id=int(m.group(1)), source="agent", message=message, observations=[obs] if obs else [], extra={"span_ids": ids}))
    trace_id = str(obj.get("trace_id") or Path(path).stem)
    task_match = re.search(r"\b([\w.-]+__[\w.-]+-\d+)\b", task)
    task_id = task_match.group(1) if task_match else trace_id[:8]
    traj = Trajectory(schema_version="TRAIL-openinference", agent_name="smolagents-CodeAgent", steps=steps, source_path=str(path))
    return Trial(
        profile="trail",
        task_id=task_id,
        repetition=0,
        run_id=trace_id,
        trial_path=str(path),
        source_format="trail",
        trajectory=traj,
        reward=0.0,
    )


def load_trail(root: str | Path) -> list[LabelledTrace]:
    """TRAIL SWE-bench traces that have both a trace file and a label file, sorted by trace id."""
    root = Path(root)
    data_dir = root / "benchmarking" / "data" / "SWE Bench"
    labels_dir = root / "benchmarking" / "processed_annotations_swe_bench"
    out = []
    for trace_path in sorted(data_dir.glob("*.json")):
        label_path = labels_dir / trace_path.name
        if not label_path.is_file():
            continue
        labels = read_json(label_path, stage="trail-labels")
        errors = labels.get("errors") or [] if isinstance(labels, dict) else []
        trial = trail_trace_to_trial(trace_path)
        out.append(LabelledTrace(trial, trail_root_cause(errors), [str(e.get("category")) for e in errors], source=trace_path.name))
    return out


def who_and_when_to_trial(path: str | Path) -> Trial:
    """Convert a Who&When failure log (``history`` of messages) to a Trial, one step per message."""
    obj = read_json(path, stage="who-and-when")
    if not isinstance(obj, dict) or not isinstance(obj.get("history"), list):
        raise InputError(str(path), "who-and-when", "no 'history' list")
    steps = [Step(step_id=0, source="user", message=str(obj.get("question", "")))]
    for i, msg in enumerate(obj["history"]):
        who = msg.get("name") or msg.get("role") or "agent"
        steps.append(Step(step_id=i + 1, source="agent", message=f"{who}: {msg.get('content', '')}"))
    p = Path(path)
    rel = f"{p.parent.name}/{p.name}"
    traj = Trajectory(schema_version="who-and-when", steps=steps, source_path=str(path))
    return Trial(
        profile="who-and-when",
        task_id=rel,
        repetition=0,
        run_id=str(obj.get("question_ID", rel)),
        trial_path=str(path),
        source_format="who_and_when",
        trajectory=traj,
        reward=0.0,
    )


def load_who_and_when(root: str | Path) -> list[LabelledTrace]:
    """The Who&When files of :data:`WHO_AND_WHEN_ROOT_CAUSE` found under ``root``."""
    base = Path(root) / "Who_and_When"
    out = []
    for rel, label in WHO_AND_WHEN_ROOT_CAUSE.items():
        p = base / rel
        if p.is_file():
            raw = read_json(p, stage="who-and-when")
            out.append(LabelledTrace(who_and_when_to_trial(p), label, [str(raw.get("mistake_reason", ""))[:200]], source=rel))
    return out


def load_human_labels_csv(path: str | Path) -> dict[tuple[str, str], str]:
    """Human labels from a CSV: columns ``trial_id,label`` and optionally ``analysis`` (default failure) and ``rater``.

    ``trial_id`` is ``profile/task_id/repetition`` (see :func:`analysis_lib.judge.analyses.trial_id`).
    Returns {(analysis, trial_id): label}; with several raters (the ``label`` workflow's CSV) the
    first rater in the file is the reference, the others count for inter-human agreement only.
    Raises InputError naming the file when a column is missing.
    """
    text = read_bytes(path, stage="human-labels").decode("utf-8-sig", errors="replace")
    reader = csv.DictReader(io.StringIO(text))
    cols = {c.strip().lower() for c in (reader.fieldnames or [])}
    if not {"trial_id", "label"} <= cols:
        raise InputError(str(path), "human-labels", f"needs columns trial_id and label, found {sorted(cols) or 'none'}")
    out: dict[tuple[str, str], str] = {}
    first_rater = None
    for row in reader:
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
        if not row.get("trial_id") or not row.get("label"):
            continue
        first_rater = first_rater or row.get("rater")
        if row.get("rater") and row["rater"] != first_rater:
            continue
        out[(row.get("analysis") or "failure", row["trial_id"])] = row["label"]
    return out
