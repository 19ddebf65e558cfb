"""Trajectory condensation: fit a trajectory into a judge's context window on purpose.

Kept whole: the first ``head`` and last ``tail`` steps and every step with an error. Every other
step keeps its number, a trimmed message and one line per tool call (trimmed arguments and
observation). If the text is still over ``max_chars``, middle steps without errors are dropped,
from the centre outwards, and replaced by an "N steps omitted" marker. Step numbers are kept
throughout so the judge can cite them. The naive baseline is the whole trajectory dumped as JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..core.trial import Step, Trajectory

_ERROR_TEXT = re.compile(r"Traceback \(most recent call last\)|\bError\b|\bexit code [1-9]|\bFAILED\b|command not found", re.IGNORECASE)


@dataclass(frozen=True)
class Condensed:
    """A condensed trajectory and its size against the naive dump (characters)."""

    text: str
    shown_steps: int
    total_steps: int
    naive_chars: int
    condensed_chars: int

    @property
    def ratio(self) -> float:
        """condensed / naive size (smaller is better); 1.0 for an empty trajectory."""
        return self.condensed_chars / self.naive_chars if self.naive_chars else 1.0


def trim(text: str | None, limit: int) -> str:
    """One-line text cut to ``limit`` characters with a marker saying how much was cut."""
    s = " ".join((text or "").split())
    if len(s) <= limit:
        return s
    return f"{s[:limit]}... [+{len(s) - limit} chars]"


def naive_dump(traj: Trajectory) -> str:
    """The whole trajectory as JSON: what a judge prompt would hold without condensation."""
    steps = [
        {
            "step_id": s.step_id,
            "source": s.source,
            "message": s.message,
            "tool_calls": [{"name": c.name, "arguments": c.arguments, "output": c.output, "is_error": c.is_error} for c in s.tool_calls],
            "observations": s.observations,
        }
        for s in traj.steps
    ]
    return json.dumps(steps, ensure_ascii=False, indent=1, default=str)


def step_has_error(step: Step) -> bool:
    """True when a tool call is marked failed or an output or observation reads like an error."""
    for call in step.tool_calls:
        if call.is_error:
            return True
        if call.is_error is None and call.output and _ERROR_TEXT.search(call.output[:2000]):
            return True
    return any(_ERROR_TEXT.search(o[:2000]) for o in step.observations)


def _args_text(arguments: dict) -> str:
    try:
        return json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(arguments)


def render_step(step: Step, full: bool, msg_chars: int, arg_chars: int, obs_chars: int) -> str:
    """One step as text; ``full`` steps get four times the trimming limits."""
    k = 4 if full else 1
    flag = " ERROR" if step_has_error(step) else ""
    lines = [f"[step {step.step_id}] {step.source}{flag}"]
    if step.message:
        lines.append(f"  message: {trim(step.message, msg_chars * k)}")
    for call in step.tool_calls:
        status = " (failed)" if call.is_error else ""
        lines.append(f"  call {call.name}{status}: {trim(_args_text(call.arguments), arg_chars * k)}")
        if call.output:
            lines.append(f"    -> {trim(call.output, obs_chars * k)}")
    for obs in step.observations:
        lines.append(f"  observation: {trim(obs, obs_chars * k)}")
    return "\n".join(lines)


def condense(
    traj: Trajectory | None,
    max_chars: int = 12_000,
    head: int = 3,
    tail: int = 3,
    msg_chars: int = 240,
    arg_chars: int = 160,
    obs_chars: int = 240,
) -> Condensed:
    """Condense ``traj`` to at most about ``max_chars`` characters (see module docstring)."""
    if traj is None or not traj.steps:
        return Condensed("(no trajectory recorded)", 0, 0, 0, 0)
    steps = traj.steps
    n = len(steps)
    naive = len(naive_dump(traj))
    keep_full = {i for i in range(n) if i < head or i >= n - tail}
    errors = {i for i, s in enumerate(steps) if step_has_error(s)}
    rendered = {i: render_step(s, i in keep_full or i in errors, msg_chars, arg_chars, obs_chars) for i, s in enumerate(steps)}
    included = set(range(n))
    protected = keep_full | errors

    def text_of(idx: set[int]) -> str:
        out, gap = [], 0
        for i in range(n):
            if i in idx:
                if gap:
                    out.append(f"[... {gap} step{'s' if gap > 1 else ''} omitted ...]")
                    gap = 0
                out.append(rendered[i])
            else:
                gap += 1
        if gap:
            out.append(f"[... {gap} steps omitted ...]")
        return "\n".join(out)

    total = sum(len(rendered[i]) + 1 for i in included)
    if total > max_chars:
        # Drop unprotected middle steps, centre first: the opening and the ending matter most.
        centre = n / 2
        droppable = sorted((i for i in included if i not in protected), key=lambda i: abs(i - centre))
        for i in droppable:
            if total <= max_chars:
                break
            included.discard(i)
            total -= len(rendered[i]) + 1
        # Still too long (many errors): drop error steps too, centre first, keeping head and tail.
        if total > max_chars:
            for i in sorted((i for i in included if i not in keep_full), key=lambda i: abs(i - centre)):
                if total <= max_chars:
                    break
                included.discard(i)
                total -= len(rendered[i]) + 1
    text = text_of(included)
    return Condensed(text, len(included), n, naive, len(text))
