"""CodeCanvas vision analysis (Layer 2): a vision model reads the PNGs the agent saw.

Three analyses per trial, each one request through the judge client (cache, budget, bounded
concurrency, schema validation with one repair) with its images and the run's facts as text:
``impact_alignment`` (impact images + edits vs blast radius), ``board_quality`` (board image +
the evidence board) and ``architecture_understanding`` (architecture image + task, files read
and edited). Images are downscaled before sending (longest side and pixel count bounded, the
limits vision APIs resize to anyway, so sending more only costs tokens); a path that leaves the
session folder is never read (see :func:`analysis_lib.codecanvas.list_images`).
"""

from __future__ import annotations

import base64
import io
import logging
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel, Field

from .. import codecanvas as cc
from ..core.fileio import read_bytes
from ..core.tools import files_touched
from ..core.trial import InputError, Trial
from .client import JudgeClient
from .templates import PromptTemplate, load_template

log = logging.getLogger(__name__)

# Anthropic's guidance: images are resized to fit 1568 px on the long edge and ~1.15 megapixels;
# OpenAI's high-detail mode fits 2048 then 768 on the short side. The stricter bound fits both.
MAX_LONG_SIDE = 1568
MAX_PIXELS = 1_150_000
# A state-listed PNG larger than this is refused rather than decoded (a decompression bomb guard).
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_IMPACT_IMAGES = 4


# --------------------------------------------------------------------------------------------
# response models
# --------------------------------------------------------------------------------------------


class ImpactAlignment(BaseModel):
    """How well the edits follow the blast radius the impact images show."""

    alignment_score: float = Field(ge=0.0, le=1.0, description="0 = edits ignore the blast radius, 1 = fully aligned")
    aligned_edits: list[str] = Field(default_factory=list)
    outside_edits: list[str] = Field(default_factory=list)
    missed_dependencies: list[str] = Field(default_factory=list)
    visual_understanding: Literal["low", "medium", "high"]
    observations: list[str] = Field(default_factory=list)


class BoardQuality(BaseModel):
    """Quality of the evidence -> claim -> decision trail on the board."""

    board_quality_score: float = Field(ge=0.0, le=1.0)
    reasoning_style: Literal["systematic", "hypothesis_driven", "reactive", "chaotic"]
    evidence_to_claim_linkage: float = Field(ge=0.0, le=1.0)
    claim_to_decision_linkage: float = Field(ge=0.0, le=1.0)
    strengths: list[str] = Field(default_factory=list)
    weaknesses: list[str] = Field(default_factory=list)
    key_insight: str = ""


class ArchitectureUnderstanding(BaseModel):
    """Whether exploration and edits fit the architecture view."""

    architecture_understanding: float = Field(ge=0.0, le=1.0)
    relevant_modules_explored: list[str] = Field(default_factory=list)
    irrelevant_exploration: list[str] = Field(default_factory=list)
    missed_modules: list[str] = Field(default_factory=list)
    edit_appropriateness: float = Field(ge=0.0, le=1.0)
    observations: list[str] = Field(default_factory=list)


RESPONSE_MODELS: dict[str, type[BaseModel]] = {
    "impact_alignment": ImpactAlignment,
    "board_quality": BoardQuality,
    "architecture_understanding": ArchitectureUnderstanding,
}


# --------------------------------------------------------------------------------------------
# images
# --------------------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class PreparedImage:
    """A PNG ready to send: re-encoded bytes and its size before and after downscaling."""

    name: str
    png: bytes
    width: int
    height: int
    original_width: int
    original_height: int

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "width": self.width, "height": self.height,
                "original_width": self.original_width, "original_height": self.original_height,
                "bytes": len(self.png)}


def fit_size(width: int, height: int, max_side: int = MAX_LONG_SIDE, max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """The largest size with the same aspect ratio within ``max_side`` and ``max_pixels`` (never upscaled)."""
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    scale = min(1.0, max_side / max(width, height), math.sqrt(max_pixels / (width * height)))
    if scale >= 1.0:
        return width, height
    return max(1, int(width * scale)), max(1, int(height * scale))


def prepare_image(path: str | os.PathLike, name: str | None = None, *, max_side: int = MAX_LONG_SIDE,
                  max_pixels: int = MAX_PIXELS) -> PreparedImage:
    """Read a PNG (or any Pillow image) and return it as PNG bytes downscaled to fit the limits.

    Raises :class:`InputError` naming the file when it is missing, too large or not an image.
    """
    p = str(path)
    data = read_bytes(p, "codecanvas", max_bytes=MAX_IMAGE_BYTES)
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            ow, oh = img.size
            if img.mode not in ("RGB", "RGBA", "L", "LA"):
                img = img.convert("RGBA" if "A" in img.getbands() or "transparency" in img.info else "RGB")
            w, h = fit_size(ow, oh, max_side, max_pixels)
            if (w, h) != (ow, oh):
                img = img.resize((w, h), Image.Resampling.LANCZOS)
            buf = io.BytesIO()
            img.save(buf, format="PNG", optimize=True)
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, SyntaxError, ValueError) as exc:
        raise InputError(p, "codecanvas", f"not a readable image ({type(exc).__name__}: {str(exc)[:120]})") from None
    return PreparedImage(name or Path(p).stem, buf.getvalue(), w, h, ow, oh)


def image_part(image: PreparedImage) -> dict[str, Any]:
    """The OpenAI-style content part litellm forwards to every vision provider."""
    b64 = base64.b64encode(image.png).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}}


# --------------------------------------------------------------------------------------------
# prompts and requests
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageTemplate(PromptTemplate):
    """A judge prompt template whose user message also carries images (data URLs).

    The judge client renders, caches (the key covers the rendered messages, hence the images)
    and budgets any template; this one only adds the image parts to the last user message.
    """

    images: tuple[str, ...] = ()

    def render(self, variables: dict[str, object]) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = PromptTemplate.render(self, variables)
        for msg in reversed(messages):
            if msg["role"] == "user":
                msg["content"] = [{"type": "text", "text": msg["content"]}] + [
                    {"type": "image_url", "image_url": {"url": url}} for url in self.images
                ]
                break
        return messages


def with_images(template: PromptTemplate, images: list[PreparedImage]) -> ImageTemplate:
    """``template`` with ``images`` attached to its user message."""
    base = {f.name: getattr(template, f.name) for f in fields(PromptTemplate)}
    return ImageTemplate(**base, images=tuple(image_part(im)["image_url"]["url"] for im in images))


def _bullets(items, empty: str = "(none)") -> str:
    items = list(items)
    return "\n".join(f"- {x}" for x in items) if items else empty


def files_read(trial: Trial) -> list[str]:
    """Distinct files the trajectory read, in first-seen order, as written."""
    out: list[str] = []
    if trial.trajectory is not None:
        for step in trial.trajectory.steps:
            for call in step.tool_calls:
                read, _edited = files_touched(call.name, call.arguments if isinstance(call.arguments, dict) else {})
                out += [x for x in read if x not in out]
    return out


def _task_text(trial: Trial, limit: int = 2000) -> str:
    if trial.trajectory is not None:
        for step in trial.trajectory.steps:
            if step.source == "user" and step.message:
                return step.message[:limit]
    return "(the instruction is not in the trajectory)"


def _board_text(state: cc.CanvasState) -> str:
    lines = ["Evidence:"]
    lines += [f"- {e.id} [{e.kind}] {e.text}" for e in state.evidence] or ["- (none)"]
    lines.append("Claims:")
    lines += [f"- {c.id} [{c.kind}] {c.text} (evidence: {', '.join(c.evidence_ids) or 'none'})" for c in state.claims] or ["- (none)"]
    lines.append("Decisions:")
    lines += [
        f"- {d.id} [{d.kind}] {d.text} (claims: {', '.join(d.claim_ids) or 'none'}; symbols: {', '.join(d.symbol_ids) or 'none'})"
        for d in state.decisions
    ] or ["- (none)"]
    return "\n".join(lines)


def _analyses_text(state: cc.CanvasState) -> str:
    if not state.analyses:
        return "(none)"
    return "\n".join(
        f"- {a.id}: target {a.target or '?'}; affected {', '.join(a.affected) or 'none'}; "
        f"addressed {', '.join(a.addressed) or 'none'}; skipped {', '.join(a.skipped) or 'none'}"
        for a in state.analyses
    )


@dataclass(slots=True)
class VisionRequest:
    """One vision analysis of one trial, ready for ``JudgeClient.judge``."""

    trial_path: str
    analysis: str
    template: ImageTemplate
    variables: dict[str, str]
    schema: type[BaseModel]
    images: list[PreparedImage]


def build_requests(trial: Trial, state: cc.CanvasState, images: dict[str, Path], *,
                   max_side: int = MAX_LONG_SIDE, max_pixels: int = MAX_PIXELS,
                   max_impact_images: int = MAX_IMPACT_IMAGES) -> tuple[list[VisionRequest], list[str]]:
    """The trial's vision requests (one per analysis whose image exists) and per-image problems.

    The impact analysis sends the last ``max_impact_images`` impact views (the agent's latest).
    """
    problems: list[str] = []

    def load(names: list[str]) -> list[PreparedImage]:
        out = []
        for n in names:
            try:
                out.append(prepare_image(images[n], n, max_side=max_side, max_pixels=max_pixels))
            except InputError as exc:
                problems.append(str(exc))
        return out

    matcher = cc.PathMatcher(state.symbol_files.values())
    blast = sorted(cc.blast_radius_files(state, matcher))
    edited = sorted(cc.distinct_files(cc.edited_paths(trial), matcher))
    common = {"task_id": trial.task_id, "profile": trial.profile}
    impacts = [n for n in images if n.startswith("impact")][-max_impact_images:]
    plan = [
        ("impact_alignment", impacts, {"analyses": _analyses_text(state), "blast_radius_files": _bullets(blast),
                                       "files_edited": _bullets(edited)}),
        ("board_quality", ["board"] if "board" in images else [], {"board": _board_text(state)}),
        ("architecture_understanding", ["architecture"] if "architecture" in images else [],
         {"task": _task_text(trial), "files_read": _bullets(files_read(trial)), "files_edited": _bullets(edited)}),
    ]
    requests = []
    for analysis, names, variables in plan:
        prepared = load(names) if names else []
        if not prepared:
            continue
        template = with_images(load_template(f"codecanvas_{analysis}"), prepared)
        requests.append(VisionRequest(trial.trial_path, analysis, template, {**common, **variables},
                                      RESPONSE_MODELS[analysis], prepared))
    return requests, problems


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------


def _empty_result(errors: list[str], has_images: bool = False) -> dict[str, Any]:
    return {"has_images": has_images, "images": [], **{k: None for k in RESPONSE_MODELS}, "calls": [],
            "errors": list(errors)}


def run_vision(trials: list[Trial], client: JudgeClient, *, batch: int = 64, **limits) -> dict[str, dict[str, Any]]:
    """Vision results by ``trial_path`` for every trial with CodeCanvas state, through the judge client.

    The client caches, budgets and bounds the calls. A result holds ``has_images``, ``images``
    (sizes sent), one validated answer per analysis (``impact_alignment``, ``board_quality``,
    ``architecture_understanding``; ``None`` when its image is absent or the call failed),
    ``calls`` (template, version, cached, tokens, cost) and ``errors`` (one line each).
    Requests go out in batches of ``batch`` so that only that many trials' images sit in memory.
    """
    results: dict[str, dict[str, Any]] = {}
    pending: list[VisionRequest] = []

    def flush() -> None:
        def job(req: VisionRequest):
            return lambda: client.judge(req.template, req.variables, req.schema)

        answers = client.judge_many([job(r) for r in pending]) if pending else []
        for req, ans in zip(pending, answers, strict=True):
            res = results[req.trial_path]
            res["calls"].append({"analysis": req.analysis, "template": ans.template, "version": ans.version,
                                 "model": ans.model, "ok": ans.ok, "cached": ans.cached, "skipped": ans.skipped,
                                 "prompt_tokens": ans.prompt_tokens, "completion_tokens": ans.completion_tokens,
                                 "cost_usd": ans.cost_usd})
            if ans.ok:
                res[req.analysis] = ans.data
            else:
                res["errors"].append(f"{req.analysis}: {ans.error}")
        pending.clear()

    for trial in trials:
        try:
            state = cc.load_trial_state(trial)
        except InputError as exc:
            results[trial.trial_path] = _empty_result([str(exc)])
            continue
        if state is None:
            continue
        images = cc.list_images(cc.session_dir_of(trial), state)
        requests, problems = build_requests(trial, state, images, **limits)
        res = _empty_result(problems + [w for w in state.warnings if "refused" in w or "missing" in w], bool(images))
        res["images"] = [im.describe() for req in requests for im in req.images]
        results[trial.trial_path] = res
        pending += requests
        if len(pending) >= batch:
            flush()
    flush()
    return results


def vision_frame(results: dict[str, dict[str, Any]]):
    """Tidy frame of the headline vision answers, one row per trial_path (for notebooks)."""
    rows = [{"trial_path": path, **cc.vision_headline(r)} for path, r in sorted(results.items())]
    return pd.DataFrame(rows, columns=["trial_path", *cc.VISION_HEADLINE])
