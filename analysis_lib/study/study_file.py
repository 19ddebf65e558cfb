"""The study design: which trials form each arm, how a task is named in every arm, which rerun counts,
how a reward becomes a pass, and where the data came from.

Runs rarely record their own design. Two Harbor jobs of one agent and model, one of them with an MCP
server configured, look like one configuration with more repetitions; the same task may be named
``linux-hda-intel-suspend-fault-001`` in one arm and ``mcp_linux-hda-intel-suspend-fault-001_0pqsfs``
in the other. A study file (YAML; ``--study FILE`` on the command line, the ``study`` parameter of
the paper pipeline, ``design=`` in the Python API) declares what the runs do not say::

    name: CodeScaleBench csb_sdlc, Claude Code + Haiku 4.5 with and without Sourcegraph MCP
    source: {name: CodeScaleBench, url: https://github.com/sourcegraph/CodeContextBench}
    baseline: baseline
    arms:
      baseline: {paths: ["*/*/baseline/**"], mcp: false}
      mcp:      {paths: ["*/*/mcp/**"], mcp: true}
    task_id: {folder: 1}            # the name of the trial folder's parent
    repetition: {regex: '_(?P<rep>\\d+)$'}
    reruns: last                    # first | last | all (extra attempts become repetitions)
    success: reward > 0

An arm is chosen by path globs (relative to the runs folder, ``*`` within one folder name, ``**``
across folders) and/or by fields of the trial's own record (its configuration, flattened to dotted
keys: ``agent.import_path``, ``agent.kwargs.mcp_config``, ``agent.mcp_servers``, ``profile`` for the
runner's condition...). A trial that matches no arm is left out with one warning row; arms that select the
same trial, or an arm that selects none, stop the analysis with one line before anything is written.
Without a study file the default rules of each reader stand (:mod:`analysis_lib.ingest`), and the
design audit warns about anything they pool despite a different configuration.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from ..core.success import DEFAULT_SUCCESS, parse_success

__all__ = [
    "DesignError", "TaskRule", "RepetitionRule", "VersionRule", "Arm", "Source", "ConfigurationRule", "StudyDesign",
    "glob_regex", "parse_design", "load_design",
]


class DesignError(ValueError):
    """A study file that cannot be used; the message is one line naming the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskRule(_Strict):
    """How a trial's task id is read: a folder name, or a named group ``task`` of a regular expression."""

    # The name of the folder this many levels above the trial's own (0: the trial folder itself).
    folder: int | None = Field(default=None, ge=0, le=12)
    # Applied (re.search) to ``field``; the group named ``task`` is the task id.
    regex: str | None = None
    field: Literal["task_name", "trial_name", "folder"] = "task_name"

    @model_validator(mode="after")
    def _one_rule(self) -> TaskRule:
        if (self.folder is None) == (self.regex is None):
            raise ValueError("give exactly one of folder (levels above the trial folder) or regex")
        if self.regex is not None:
            _named_group(self.regex, "task")
        return self


class RepetitionRule(_Strict):
    """The repetition number read from the trial folder's name (group ``rep``), e.g. ``_(?P<rep>\\d+)$``."""

    regex: str

    @field_validator("regex")
    @classmethod
    def _has_rep(cls, v: str) -> str:
        _named_group(v, "rep")
        return v


class VersionRule(_Strict):
    """The dataset version of a trial: a constant, or a dotted key of its configuration record."""

    value: str | None = None
    field: str | None = None

    @model_validator(mode="after")
    def _one_rule(self) -> VersionRule:
        if (self.value is None) == (self.field is None):
            raise ValueError("give exactly one of value or field")
        return self


class Arm(_Strict):
    """One arm: the trials its selectors match (every selector given must match)."""

    paths: list[str] = Field(default_factory=list)
    fields: dict[str, Any] = Field(default_factory=dict)
    # Whether this arm was offered MCP tools (None: not declared).
    mcp: bool | None = None
    task_id: TaskRule | None = None
    dataset_version: VersionRule | None = None
    # A dotted key of the trial's record saying whether the treatment was used (e.g. ``skills_used``): the
    # audit reports the arm's uptake from it. None: not recorded (MCP use is read from the calls instead).
    uptake: str | None = None

    @model_validator(mode="after")
    def _selects(self) -> Arm:
        if not self.paths and not self.fields:
            raise ValueError("an arm needs paths (globs) or fields to select its trials")
        for p in self.paths:
            glob_regex(p)
        return self

    def rule(self) -> str:
        """The selector in words, for ``--list`` and the audit."""
        parts = [f"path {' or '.join(self.paths)}"] if self.paths else []
        parts += [f"{k} = {orjson.dumps(v).decode()}" for k, v in sorted(self.fields.items())]
        return " and ".join(parts)


class Source(_Strict):
    """Where the runs come from, named in every report made from them."""

    name: str
    url: str | None = None
    commit: str | None = None
    licence: str | None = None
    note: str | None = None

    def line(self) -> str:
        where = f" ({self.url}" + (f" at {self.commit[:12]}" if self.commit else "") + ")" if self.url else ""
        return f"{self.name}{where}"


class ConfigurationRule(_Strict):
    """What makes a configuration (an agent and model, a suite): the arms are compared within each.

    Exactly one of: ``fields``, dotted keys of the trial's record whose values, joined by `` + ``, name its
    configuration (``[agent.name, agent.model_name]``; ``[configuration]`` for a results table); ``folder``, the
    name of the folder this many levels above the trial's; ``paths``, configuration name -> globs (as an arm's).
    ``moderators``: name -> dotted key of the record (``harness: harness``), one value per configuration, for the
    exploratory meta-regression.
    """

    fields: list[str] = Field(default_factory=list)
    folder: int | None = Field(default=None, ge=0, le=12)
    paths: dict[str, list[str]] = Field(default_factory=dict)
    moderators: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_rule(self) -> ConfigurationRule:
        given = [k for k, v in (("fields", self.fields), ("folder", self.folder is not None), ("paths", self.paths)) if v]
        if len(given) != 1:
            raise ValueError("give exactly one of fields (dotted keys of the trial's record), folder (levels above "
                             "the trial folder) or paths (configuration name -> globs)")
        for name, globs in self.paths.items():
            if not globs:
                raise ValueError(f"configuration {name!r} needs at least one path glob")
            for p in globs:
                glob_regex(p)
        return self

    def rule(self) -> str:
        """The rule in words, for the audit."""
        if self.fields:
            return "the values of " + " + ".join(self.fields)
        if self.folder is not None:
            return f"the folder {self.folder} level{'s' if self.folder != 1 else ''} above the trial's"
        return "paths: " + "; ".join(f"{n} = {' or '.join(g)}" for n, g in sorted(self.paths.items()))


class StudyDesign(_Strict):
    """A study file, validated. :attr:`where` names the file it was read from (not part of the design or its hash)."""

    name: str
    # What the paper says of the study where the runs cannot say it, printed verbatim: its title, and what the
    # treatment arms were given and the control arm (the baseline) was not.
    title: str | None = None
    treatment: str | None = None
    control: str | None = None
    simulated: bool = False
    source: Source | None = None
    baseline: str | None = None
    arms: dict[str, Arm] = Field(min_length=1)
    task_id: TaskRule | None = None
    repetition: RepetitionRule | None = None
    reruns: Literal["first", "last", "all"] = "all"
    dataset_version: VersionRule | None = None
    success: str = DEFAULT_SUCCESS
    # Several configurations, each with both arms: tasks pair and arms compare within a configuration.
    configurations: ConfigurationRule | None = None
    # The file the design was read from, for the one-line errors of placing trials (not part of the design).
    _path: str | None = PrivateAttr(default=None)

    @property
    def where(self) -> str:
        """The study file's path as read, for error lines; ``<study>`` for a design built in code."""
        return self._path or "<study>"

    @field_validator("success")
    @classmethod
    def _success_rule(cls, v: str) -> str:
        parse_success(v)
        return v

    @field_validator("arms")
    @classmethod
    def _arm_names(cls, v: dict[str, Arm]) -> dict[str, Arm]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.@+-]*", name):
                raise ValueError(f"arm name {name!r}: letters, digits and _ . @ + - only")
        return v

    @model_validator(mode="after")
    def _baseline_is_arm(self) -> StudyDesign:
        if self.baseline is not None and self.baseline not in self.arms:
            raise ValueError(f"baseline {self.baseline!r} is not an arm; arms are {sorted(self.arms)}")
        return self

    @field_validator("configurations")
    @classmethod
    def _configuration_arms(cls, v: ConfigurationRule | None, info: ValidationInfo) -> ConfigurationRule | None:
        # Within a configuration one treatment is compared with its control: the study file names both.
        arms, baseline = info.data.get("arms") or {}, info.data.get("baseline")
        if v is not None and (len(arms) != 2 or baseline is None):
            raise ValueError("a study with configurations declares two arms, the control (baseline: NAME) and the "
                             f"treatment, compared within each configuration; got arms {sorted(arms)}"
                             + ("" if baseline is not None else " and no baseline"))
        return v

    @property
    def treatment_arm(self) -> str | None:
        """The treatment arm of a study with configurations (the arm that is not the baseline), else None."""
        if self.configurations is None:
            return None
        return next(a for a in self.arms if a != self.baseline)

    def sha256(self) -> str:
        """Hash of the design (its parsed, canonical form): recorded with the outputs made from it. Keys a study
        file leaves unset since they were added (configurations, the title, treatment and control texts, an arm's
        uptake) do not enter it, so that the hash of an older study file stays what it was."""
        doc = self.model_dump(mode="json")
        for key in ("configurations", "title", "treatment", "control"):
            if doc.get(key) is None:
                doc.pop(key, None)
        for arm in doc["arms"].values():
            if arm.get("uptake") is None:
                arm.pop("uptake", None)
        return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()

    def mcp_arms(self) -> list[str]:
        return [name for name, arm in self.arms.items() if arm.mcp]


def _named_group(pattern: str, group: str) -> None:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"regex {pattern!r} does not compile ({exc})") from None
    if group not in compiled.groupindex:
        raise ValueError(f"regex {pattern!r} needs a named group (?P<{group}>...)")


@functools.lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regular expression: ``*`` and ``?`` stay within one folder name, ``**`` spans folders.

    A pattern matches a trial's path relative to the runs folder, or any folder above the trial
    (``baseline/**`` and ``baseline`` both select everything under ``baseline/``).
    """
    if not pattern or pattern.startswith("/") or "\\" in pattern:
        raise ValueError(f"path glob {pattern!r}: give a relative path with / between folders")
    out = []
    parts = pattern.strip("/").split("/")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        piece = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in part)
        out.append(piece + ("" if last else "/"))
    return re.compile("^" + "".join(out) + "(?:/.*)?$")


def parse_design(obj: Any, source: str = "<study>") -> StudyDesign:
    """Validate a parsed study file; :class:`DesignError` names the file and the first bad key."""
    if not isinstance(obj, dict):
        raise DesignError(f"{source}: a study file is a mapping (name, arms, ...), got {type(obj).__name__}")
    try:
        design = StudyDesign.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        raise DesignError(f"{source}: {loc}: {msg}") from None
    design._path = source
    return design


def load_design(path: str | os.PathLike) -> StudyDesign:
    """Read and validate a study file (YAML); one-line :class:`DesignError` on any problem."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise DesignError(f"{p}: study file not found") from None
    except OSError as exc:
        raise DesignError(f"{p}: cannot read the study file ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise DesignError(f"{p}: the study file is not UTF-8 text") from None
    try:
        obj = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DesignError(f"{p}: not valid YAML ({str(exc).splitlines()[0]})") from None
    return parse_design(obj, str(p))
