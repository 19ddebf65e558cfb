"""Seeded per-judgement order of the classes listed in a classification prompt.

Small models tend to pick the first class of a list; a fixed order turns that bias into a
systematic label shift. Each judgement gets its own order, drawn from a hash of its key (analysis,
unit, seed), so it is random across judgements yet reproducible, and recorded with the result.
"""

from __future__ import annotations

import hashlib
import random

# The classes of each classification prompt with the one-line description the judge reads.
CLASSES: dict[str, dict[str, str]] = {
    "strategy": {
        "systematic_exploration": "surveys the code base methodically before changing anything",
        "hypothesis_driven": "forms an explicit hypothesis, tests it, refines it",
        "grep_and_fix": "searches for a symbol or error text and patches the match directly",
        "trial_and_error": "edits and re-runs repeatedly with little analysis in between",
        "tool_guided": "lets specialised tools (call graphs, code maps, MCP servers) direct the work",
        "chaotic": "no discernible plan; repeated or contradictory actions",
    },
    "failure": {
        "incomplete_exploration": "acted before finding the relevant code or information",
        "misunderstood_task": "solved a different problem than the one asked",
        "correct_approach_poor_execution": "right plan, wrong or sloppy implementation",
        "knowledge_gap": "lacked or invented facts about the library, language or domain",
        "tool_misuse": "called tools wrongly or misread their output",
        "context_loss": "forgot or contradicted earlier findings or instructions",
        "premature_termination": "stopped before the work was done or verified",
        "infinite_loop": "repeated the same actions without progress",
    },
}


def seeded_shuffle(items: list[str], key: str) -> list[str]:
    """``items`` in an order drawn from a hash of ``key``: random across keys, the same for one key."""
    out = list(items)
    random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")).shuffle(out)
    return out


def class_order(analysis: str, key: str, seed: int = 0, shuffle: bool = True) -> list[str]:
    """The classes of ``analysis`` in the order shown for judgement ``key`` (canonical order when not shuffled)."""
    names = list(CLASSES[analysis])
    return seeded_shuffle(names, f"{analysis}|{key}|{seed}") if shuffle else names


def class_list_text(analysis: str, order: list[str]) -> str:
    """The prompt's bullet list of classes in ``order``."""
    return "\n".join(f"- {name}: {CLASSES[analysis][name]}" for name in order)
