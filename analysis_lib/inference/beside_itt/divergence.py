"""Where two trajectories of one task part ways, for the trials whose outcomes differ (exploratory).

A discordant pair is repetition k of a task under A and repetition k of the same task under B (the
runner's blocked schedule runs them side by side) where exactly one of the two passed; infrastructure
errors are left out. Each trajectory is its sequence of **actions** (:mod:`analysis_lib.metrics.actions`:
one ``(tool name, target)`` per tool call of the root trajectory, worked out when the trial was read for
its metrics, so nothing here reads the runs again). The **first divergence** is the smallest 1-based position i where the two
actions differ; when one sequence is a prefix of the other it is the position after the shorter
one's last call (one agent stopped, the other went on); two equal sequences do not diverge.
``diverge_at_name`` is the same position on the tool names alone. Whether the MCP arm's action at
that position is an MCP call is tabulated: a descriptive hint of what carries the effect, not a test.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ... import stats
from ...metrics.actions import Action
from ..comparisons import usable_trials

__all__ = [
    "COLUMNS", "ESTIMAND", "TABLE_COLUMNS", "first_divergence", "discordant_pairs", "divergence_pairs",
    "divergence_table",
]

COLUMNS = ["profile_a", "profile_b", "task_id", "repetition", "passed", "trial_path_a", "trial_path_b", "n_calls_a",
           "n_calls_b", "status", "estimand", "diverge_at", "diverge_at_name", "call_a", "call_b", "mcp_arm", "mcp_call"]
# The one estimand of divergence.csv: the 1-based position of the first differing action (module docstring).
ESTIMAND = "first_divergence"
TABLE_COLUMNS = ["profile_a", "profile_b", "passed", "n_pairs", "n_no_trajectory", "n_identical", "n_diverged",
                 "n_at_mcp_call", "n_at_other_call", "median_diverge_at"]


def first_divergence(a: list[Action], b: list[Action], *, names_only: bool = False) -> int | None:
    """1-based position of the first differing action (module docstring); None when the sequences are equal."""
    key = (lambda x: x.name) if names_only else (lambda x: x.key())  # noqa: E731
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if key(x) != key(y):
            return i + 1
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


def discordant_pairs(metrics: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Repetition k of a task under A and under B where exactly one passed: ``task_id, repetition, passed,
    trial_path_a, trial_path_b``."""
    trials = usable_trials(metrics)
    ok = stats.as_outcome(trials["success"].to_numpy()).notna().to_numpy()
    t = trials[ok].assign(win=stats.as_outcome(trials.loc[ok, "success"].to_numpy()).to_numpy())
    t = t.assign(profile=t["profile"].astype(str), task_id=t["task_id"].astype(str))
    cols = ["task_id", "repetition", "win", "trial_path"]
    both = t[t["profile"] == a][cols].merge(t[t["profile"] == b][cols], on=["task_id", "repetition"], suffixes=("_a", "_b"))
    both = both[both["win_a"] != both["win_b"]].sort_values(["task_id", "repetition"])
    return pd.DataFrame({"task_id": both["task_id"], "repetition": both["repetition"].astype(int),
                         "passed": np.where(both["win_b"] == 1.0, b, a), "trial_path_a": both["trial_path_a"],
                         "trial_path_b": both["trial_path_b"]}).reset_index(drop=True)


def divergence_pairs(metrics: pd.DataFrame, pairs: list[tuple[str, str]], seqs: Mapping[str, list[Action] | None],
                     offered: dict[str, bool | None]) -> pd.DataFrame:
    """One row per discordant pair of every profile pair (``COLUMNS``), with its first divergence; ``seqs``: each
    trial's action sequence by its path in the table (a study's ``actions``; absent or None: no trajectory)."""
    found = {(a, b): discordant_pairs(metrics, a, b) for a, b in pairs}
    rows = []
    for (a, b), disc in found.items():
        mcp_arm = b if offered.get(b) is True and offered.get(a) is not True else \
            a if offered.get(a) is True and offered.get(b) is not True else ""
        for r in disc.itertuples():
            sa, sb = seqs.get(r.trial_path_a), seqs.get(r.trial_path_b)
            row = {"profile_a": a, "profile_b": b, "task_id": r.task_id, "repetition": r.repetition, "passed": r.passed,
                   "estimand": ESTIMAND,
                   "trial_path_a": r.trial_path_a, "trial_path_b": r.trial_path_b, "mcp_arm": mcp_arm,
                   "n_calls_a": None if sa is None else len(sa), "n_calls_b": None if sb is None else len(sb)}
            if sa is None or sb is None:
                rows.append({**row, "status": "no trajectory"})
                continue
            at = first_divergence(sa, sb)
            if at is None:
                rows.append({**row, "status": "identical"})
                continue
            ca = sa[at - 1] if at <= len(sa) else None
            cb = sb[at - 1] if at <= len(sb) else None
            mine = cb if mcp_arm == b else ca if mcp_arm == a else None
            rows.append({**row, "status": "diverged", "diverge_at": at, "diverge_at_name": first_divergence(sa, sb, names_only=True),
                         "call_a": ca.text() if ca else "(no further call)", "call_b": cb.text() if cb else "(no further call)",
                         "mcp_call": None if not mcp_arm else bool(mine is not None and mine.mcp)})
    out = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("n_calls_a", "n_calls_b", "diverge_at", "diverge_at_name"):
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("Int64")
    out["mcp_call"] = out["mcp_call"].astype("boolean")
    return out


def divergence_table(div: pd.DataFrame) -> pd.DataFrame:
    """Per profile pair and winner: discordant pairs, how many first diverged at an MCP call of the MCP arm,
    at another call, not at all, or could not be compared; the median position of the first divergence."""
    rows = []
    for (a, b, passed), g in div.groupby(["profile_a", "profile_b", "passed"], sort=True):
        d = g[g["status"] == "diverged"]
        at = d["diverge_at"].dropna().astype(float)
        rows.append({"profile_a": a, "profile_b": b, "passed": passed, "n_pairs": len(g),
                     "n_no_trajectory": int((g["status"] == "no trajectory").sum()),
                     "n_identical": int((g["status"] == "identical").sum()), "n_diverged": len(d),
                     "n_at_mcp_call": int(d["mcp_call"].fillna(False).sum()),
                     "n_at_other_call": int((~d["mcp_call"].fillna(False)).sum()),
                     "median_diverge_at": float(at.median()) if len(at) else np.nan})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)
