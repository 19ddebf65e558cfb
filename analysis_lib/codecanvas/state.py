"""CodeCanvas ``state.json`` and its images: lenient parsing and a safe image listing.

The state is untrusted input: missing keys default, ids that point nowhere become warnings, and
an image path that leaves the session folder is refused (the PNGs are sent to a remote model).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.fileio import read_json
from ..core.trial import InputError, Trial

log = logging.getLogger(__name__)

STAGE = "codecanvas"
SESSION_SUBDIR = Path("agent") / "sessions" / "codecanvas"
STATE_FILE = "state.json"


@dataclass(slots=True)
class Evidence:
    """One evidence item on the board (what the agent looked at)."""

    id: str
    kind: str = ""  # search | read | impact | test
    text: str = ""
    step: int | None = None
    png_path: str | None = None


@dataclass(slots=True)
class Claim:
    """One claim the agent made from evidence."""

    id: str
    kind: str = ""  # hypothesis | finding | question
    text: str = ""
    evidence_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Decision:
    """One decision the agent took (on symbols, from claims)."""

    id: str
    kind: str = ""  # mark | skip | plan | edit
    text: str = ""
    symbol_ids: list[str] = field(default_factory=list)
    claim_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ImpactAnalysis:
    """One blast-radius analysis: a target symbol, the symbols it affects and their fate."""

    id: str
    target: str | None = None
    affected: list[str] = field(default_factory=list)
    addressed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    png_path: str | None = None


@dataclass(slots=True)
class CanvasState:
    """A parsed ``state.json``; ``warnings`` lists what was lenient (dangling ids, bad items)."""

    path: str
    version: int | None = None
    symbol_files: dict[str, str] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    analyses: list[ImpactAnalysis] = field(default_factory=list)
    images: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def session_dir(self) -> Path:
        return Path(self.path).parent


def _str_or_none(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return text or None


def _id_list(value: Any, where: str, warnings: list[str]) -> list[str]:
    """A list of ids, de-duplicated in order; a scalar becomes a one-item list."""
    if value is None:
        return []
    if isinstance(value, (str, int)):
        value = [value]
    if not isinstance(value, list):
        warnings.append(f"{where}: expected a list of ids, got {type(value).__name__}; ignored")
        return []
    out: list[str] = []
    for item in value:
        sid = _str_or_none(item)
        if sid is None:
            warnings.append(f"{where}: non-id entry {item!r} ignored")
        elif sid not in out:
            out.append(sid)
    return out


def _items(obj: dict, key: str, warnings: list[str]) -> list[tuple[int, dict]]:
    """The object items of a top-level list; a dict keyed by id is accepted too (older states)."""
    raw = obj.get(key)
    if raw is None:
        return []
    if isinstance(raw, dict):
        raw = [dict(v, id=v.get("id", k)) if isinstance(v, dict) else v for k, v in raw.items()]
    if not isinstance(raw, list):
        warnings.append(f"{key}: expected a list, got {type(raw).__name__}; ignored")
        return []
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, dict):
            out.append((i, item))
        else:
            warnings.append(f"{key}[{i}]: not an object; ignored")
    return out


def _first(item: dict, *keys: str) -> Any:
    """The first present key's value: the simulator's names first, then the CodeCanvas server's own
    (``target_id``, ``affected_ids``... and a decision's single ``target``), so both read alike."""
    for key in keys:
        if item.get(key) is not None:
            return item[key]
    return None


def _item_id(item: dict, key: str, i: int, prefix: str, warnings: list[str]) -> str:
    iid = _str_or_none(item.get("id"))
    if iid is None:
        iid = f"{prefix}?{i + 1}"
        warnings.append(f"{key}[{i}]: no id; called {iid}")
    return iid


def parse_state(obj: Any, path: str | os.PathLike = "<memory>") -> CanvasState:
    """Build a :class:`CanvasState` from decoded JSON, leniently.

    Missing keys default to empty; items that are not objects are skipped; ids that point
    nowhere are kept but recorded in ``warnings``. Only a root that is not an object raises
    :class:`InputError`.
    """
    path = str(path)
    if not isinstance(obj, dict):
        raise InputError(path, STAGE, f"state.json root is {type(obj).__name__}, expected an object")
    w: list[str] = []
    state = CanvasState(path=path)
    version = obj.get("version")
    state.version = version if isinstance(version, int) and not isinstance(version, bool) else None

    sf = obj.get("symbol_files")
    if isinstance(sf, dict):
        for sym, fpath in sf.items():
            fp = _str_or_none(fpath)
            if fp is None:
                w.append(f"symbol_files[{sym!r}]: not a path; ignored")
            else:
                state.symbol_files[str(sym)] = fp
    elif sf is not None:
        w.append(f"symbol_files: expected an object, got {type(sf).__name__}; ignored")

    for i, it in _items(obj, "evidence", w):
        step = it.get("step")
        state.evidence.append(
            Evidence(
                id=_item_id(it, "evidence", i, "E", w),
                kind=str(it.get("kind") or ""),
                text=str(it.get("text") or ""),
                step=step if isinstance(step, int) and not isinstance(step, bool) else None,
                png_path=_str_or_none(it.get("png_path")),
            )
        )
    for i, it in _items(obj, "claims", w):
        cid = _item_id(it, "claims", i, "C", w)
        state.claims.append(
            Claim(
                id=cid,
                kind=str(it.get("kind") or ""),
                text=str(it.get("text") or ""),
                evidence_ids=_id_list(it.get("evidence_ids"), f"claim {cid}.evidence_ids", w),
            )
        )
    for i, it in _items(obj, "decisions", w):
        did = _item_id(it, "decisions", i, "D", w)
        state.decisions.append(
            Decision(
                id=did,
                kind=str(it.get("kind") or ""),
                text=str(it.get("text") or ""),
                symbol_ids=_id_list(_first(it, "symbol_ids", "target"), f"decision {did}.symbol_ids", w),
                claim_ids=_id_list(it.get("claim_ids"), f"decision {did}.claim_ids", w),
            )
        )
    for i, it in _items(obj, "analyses", w):
        aid = _item_id(it, "analyses", i, "A", w)
        state.analyses.append(
            ImpactAnalysis(
                id=aid,
                target=_str_or_none(_first(it, "target", "target_id")),
                affected=_id_list(_first(it, "affected", "affected_ids"), f"analysis {aid}.affected", w),
                addressed=_id_list(_first(it, "addressed", "addressed_ids"), f"analysis {aid}.addressed", w),
                skipped=_id_list(_first(it, "skipped", "skipped_ids"), f"analysis {aid}.skipped", w),
                png_path=_str_or_none(it.get("png_path")),
            )
        )
    images = obj.get("images")
    if isinstance(images, dict):
        state.images = {str(k): v for k, v in ((k, _str_or_none(v)) for k, v in images.items()) if v}
    elif images is not None:
        w.append(f"images: expected an object, got {type(images).__name__}; ignored")

    _check_references(state, w)
    state.warnings = w
    return state


def _check_references(state: CanvasState, w: list[str]) -> None:
    """Record ids that point nowhere (a claim citing missing evidence, an unknown symbol...)."""
    evidence = {e.id for e in state.evidence}
    claims = {c.id for c in state.claims}
    symbols = state.symbol_files
    for c in state.claims:
        for eid in c.evidence_ids:
            if eid not in evidence:
                w.append(f"claim {c.id} cites evidence {eid}, which does not exist")
    for d in state.decisions:
        for cid in d.claim_ids:
            if cid not in claims:
                w.append(f"decision {d.id} cites claim {cid}, which does not exist")
        for sid in d.symbol_ids:
            if sid not in symbols:
                w.append(f"decision {d.id} names symbol {sid}, which has no entry in symbol_files")
    for a in state.analyses:
        if a.target is None:
            w.append(f"analysis {a.id} has no target")
        elif a.target not in symbols:
            w.append(f"analysis {a.id} target {a.target} has no entry in symbol_files")
        for role in ("affected", "addressed", "skipped"):
            for sid in getattr(a, role):
                if sid not in symbols:
                    w.append(f"analysis {a.id} {role} symbol {sid} has no entry in symbol_files")


def read_state(session_dir: str | os.PathLike) -> CanvasState:
    """Read ``<session_dir>/state.json`` (the folder or the file itself may be given).

    Raises :class:`InputError` (one line, naming the file) when the file is missing, unreadable
    or not a JSON object; everything else is lenient (see :func:`parse_state`).
    """
    p = Path(session_dir)
    path = p if p.name == STATE_FILE and not p.is_dir() else p / STATE_FILE
    return parse_state(read_json(path, STAGE), path)


def session_dir_of(trial: Trial) -> Path:
    """The CodeCanvas session folder of a trial (the reader's ``paths['codecanvas']`` if set)."""
    given = trial.paths.get("codecanvas") if trial.paths else None
    if given:
        gp = Path(given)
        return gp.parent if gp.suffix else gp
    return Path(trial.trial_path) / SESSION_SUBDIR


def load_trial_state(trial: Trial) -> CanvasState | None:
    """The trial's CodeCanvas state, ``None`` when it has none; a broken file raises InputError."""
    if not (trial.paths and trial.paths.get("codecanvas")):
        # Asked for every trial's metrics: one stat, without building Path objects (~5 µs a trial).
        if not os.path.exists(os.path.join(trial.trial_path, *SESSION_SUBDIR.parts, STATE_FILE)):
            return None
    sdir = session_dir_of(trial)
    if not (sdir / STATE_FILE).exists():
        return None
    return read_state(sdir)


def _safe_image(session_dir: Path, root: Path, rel: str, warnings: list[str]) -> Path | None:
    """The image path if it stays inside the session folder, else ``None`` with a warning.

    Refused: absolute paths, ``..`` escapes and symlinks whose target lies outside, since the
    PNG is sent to a remote model and a state file is untrusted input.
    """
    norm = rel.replace("\\", "/")
    if norm.startswith("/") or re.match(r"^[A-Za-z]:/", norm) or os.path.isabs(rel):
        warnings.append(f"{session_dir}: image path {rel!r} is absolute; refused (must be inside the session folder)")
        return None
    candidate = session_dir / norm
    try:
        resolved = candidate.resolve(strict=False)
    except (OSError, RuntimeError, ValueError) as exc:  # symlink loop, NUL byte
        warnings.append(f"{session_dir}: image path {rel!r} cannot be resolved ({exc}); refused")
        return None
    if resolved != root and root not in resolved.parents:
        warnings.append(f"{session_dir}: image path {rel!r} points outside the session folder; refused")
        return None
    if not resolved.is_file():
        warnings.append(f"{session_dir}: image {rel!r} is listed but missing")
        return None
    return resolved  # the checked target itself, so that a later read cannot be redirected


def list_images(session_dir: str | os.PathLike, state: CanvasState | None = None) -> dict[str, Path]:
    """The session's images by name: ``architecture``, ``impact_<analysis id>``, ``board``.

    Names come from ``state.images``, the analyses' and evidence items' ``png_path`` (keyed by
    file stem) and the PNGs present in the folder. A path outside the folder is refused with a
    warning (added to ``state.warnings`` when a state is given, and logged).
    """
    sdir = Path(session_dir)
    if sdir.name == STATE_FILE:
        sdir = sdir.parent
    warnings: list[str] = []
    found: dict[str, Path] = {}
    if not sdir.is_dir():
        return found
    root = sdir.resolve()
    listed: list[tuple[str, str]] = []
    if state is not None:
        listed += [(name, rel) for name, rel in state.images.items()]
        listed += [(f"impact_{a.id}", a.png_path) for a in state.analyses if a.png_path]
        listed += [(Path(e.png_path.replace("\\", "/")).stem, e.png_path) for e in state.evidence if e.png_path]
    tried: set[str] = set()
    for name, rel in listed:
        if name in found or rel in tried:
            continue
        tried.add(rel)
        path = _safe_image(sdir, root, rel, warnings)
        if path is not None:
            found.setdefault(name, path)
    for png in sorted(sdir.glob("*.png")):
        stem = png.stem
        if stem in found or any(p.name == png.name for p in found.values()):
            continue
        if stem in ("architecture", "board") or stem.startswith("impact"):
            path = _safe_image(sdir, root, png.name, warnings)
            if path is not None:
                found[stem] = path
    for msg in warnings:
        log.warning("%s", msg)
    if state is not None:
        state.warnings.extend(m for m in warnings if m not in state.warnings)
    # architecture first, impacts in analysis order, board last: the order a reader follows
    order = {"architecture": 0, "board": 2}
    return dict(sorted(found.items(), key=lambda kv: (order.get(kv[0], 1), _natural_key(kv[0]))))


def _natural_key(text: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]
