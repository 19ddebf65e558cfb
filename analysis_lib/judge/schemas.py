"""Response models of the judge analyses: the field names and enums each analysis answers with, nothing more.

Each model's JSON schema is sent as ``response_format`` so that servers with constrained
decoding return valid JSON; every answer is still validated with ``model_validate_json``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

PrimaryStrategy = Literal[
    "systematic_exploration", "hypothesis_driven", "grep_and_fix", "trial_and_error", "tool_guided", "chaotic"
]
RootCause = Literal[
    "incomplete_exploration",
    "misunderstood_task",
    "correct_approach_poor_execution",
    "knowledge_gap",
    "tool_misuse",
    "context_loss",
    "premature_termination",
    "infinite_loop",
]
InitTiming = Literal["early", "late", "never"]
Confidence = Literal["low", "medium", "high"]

# Lists are bounded (maxItems in the JSON schema): constrained decoders then cannot run on forever.
MAX_ITEMS = 8


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AdaptationEvent(_Strict):
    """A point where the agent changed course, cited by step number."""

    step: int
    description: str


class StrategyAnalysis(_Strict):
    """Strategy classification of one trajectory."""

    primary_strategy: PrimaryStrategy
    strategy_quality: float = Field(ge=0.0, le=1.0)
    adaptation_events: list[AdaptationEvent] = Field(max_length=MAX_ITEMS)


class FailureAnalysis(_Strict):
    """Root cause of one failed trajectory."""

    root_cause: RootCause
    critical_step: int
    counterfactual: str


class MCPUtilization(_Strict):
    """How well one trajectory used its MCP tools (scores in 0..1)."""

    utilization_quality: float = Field(ge=0.0, le=1.0)
    init_timing: InitTiming
    dependency_leverage: float = Field(ge=0.0, le=1.0)
    search_effectiveness: float = Field(ge=0.0, le=1.0)
    missed_opportunities: list[str] = Field(max_length=MAX_ITEMS)
    effective_uses: list[str] = Field(max_length=MAX_ITEMS)


class Quote(_Strict):
    """A short quote from one profile's trajectory, with the step it comes from."""

    profile: str
    step: int
    text: str


class ComparativeNarrative(_Strict):
    """Which profile won one task and why (``winner`` is a profile name or ``tie``)."""

    winner: str
    key_differentiator: str
    quotes: list[Quote] = Field(max_length=4)
    paragraph: str


class PaperClaim(_Strict):
    statement: str
    evidence: str
    confidence: Confidence


class Synthesis(_Strict):
    """Findings over the whole run set."""

    task_difficulty_ranking: list[str] = Field(max_length=100)
    mcp_benefit_patterns: list[str] = Field(max_length=MAX_ITEMS)
    mcp_overhead_patterns: list[str] = Field(max_length=MAX_ITEMS)
    emergent_findings: list[str] = Field(max_length=MAX_ITEMS)
    paper_claims: list[PaperClaim] = Field(max_length=MAX_ITEMS)
    limitations: list[str] = Field(max_length=MAX_ITEMS)
    future_work: list[str] = Field(max_length=MAX_ITEMS)


def comparative_model(profiles: list[str]) -> type[ComparativeNarrative]:
    """A ComparativeNarrative whose ``winner`` is constrained to these profiles or ``tie``."""
    choices = tuple(sorted(set(profiles))) + ("tie",)
    return create_model(  # type: ignore[call-overload]
        "ComparativeNarrative",
        __base__=ComparativeNarrative,
        winner=(Literal[choices], ...),  # type: ignore[valid-type]
    )


# The categorical field of each analysis: what agreement statistics compare.
LABEL_FIELDS = {
    "strategy": "primary_strategy",
    "failure": "root_cause",
    "mcp": "init_timing",
    "comparative": "winner",
}
