"""One name per model and per task, whatever source or provider wrote it.

The same Claude model reaches the logs as ``claude-sonnet-4-20250514`` (Anthropic),
``anthropic/claude-sonnet-4`` or ``openrouter/anthropic/claude-3.5-sonnet`` (OpenRouter, litellm),
``us.anthropic.claude-sonnet-4-20250514-v1:0`` (Bedrock) and ``claude-sonnet-4@20250514``
(Vertex). Profiles pair trials by name, so every reader maps a model id through
:func:`canonical_model` (the raw id stays in ``model_name``), and task ids lose a dataset or
organisation prefix (``terminal-bench/hello-world`` -> ``hello-world``), kept apart by
:func:`split_task_id`. Rules (docs/formats.md, "Identifiers"):

1. provider and router prefixes go: everything up to the last ``/``;
2. Bedrock: a region prefix (``us.``, ``eu.``, ``apac.``, ``global.``...), the vendor (``anthropic.``)
   and the ``-v1:0`` version suffix after a dated id go;
3. Vertex: ``name@YYYYMMDD`` -> ``name-YYYYMMDD``, and its ``-v2`` before the ``@`` goes
   (``claude-3-5-sonnet-v2@20241022`` is Anthropic's ``claude-3-5-sonnet-20241022``);
4. Claude version numbers written with dots (``claude-3.5-sonnet``, ``claude-sonnet-4.5``) take dashes,
   ``-latest`` goes, and an undated Claude alias takes the snapshot Anthropic's alias names
   (:data:`CLAUDE_ALIASES`); an alias it does not list stays undated.
Other vendors' ids keep everything but the prefixes of rules 1 and 2.
"""

from __future__ import annotations

import re

# Anthropic's undated aliases -> the dated snapshot each one named (Anthropic's models overview).
CLAUDE_ALIASES = {
    "claude-3-haiku": "claude-3-haiku-20240307",
    "claude-3-opus": "claude-3-opus-20240229",
    "claude-3-5-haiku": "claude-3-5-haiku-20241022",
    "claude-3-5-sonnet": "claude-3-5-sonnet-20241022",
    "claude-3-7-sonnet": "claude-3-7-sonnet-20250219",
    "claude-sonnet-4": "claude-sonnet-4-20250514",
    "claude-sonnet-4-0": "claude-sonnet-4-20250514",
    "claude-opus-4": "claude-opus-4-20250514",
    "claude-opus-4-0": "claude-opus-4-20250514",
    "claude-opus-4-1": "claude-opus-4-1-20250805",
    "claude-sonnet-4-5": "claude-sonnet-4-5-20250929",
    "claude-haiku-4-5": "claude-haiku-4-5-20251001",
    "claude-opus-4-5": "claude-opus-4-5-20251101",
}
_BEDROCK_REGION = re.compile(r"^(?:us|eu|apac|ap|ca|sa|us-gov|global|jp|au)\.(?=[a-z0-9-]+\.)")
_BEDROCK_VENDOR = re.compile(r"^(?:anthropic|amazon|meta|mistral|cohere|ai21|deepseek|openai|qwen|writer)\.")
_DATED_VERSION = re.compile(r"(-\d{8})-v\d+(?::\d+)?$")
_VERTEX = re.compile(r"^(?P<name>.+?)(?:-v\d+)?@(?P<date>\d{8})$")
_DOTTED = re.compile(r"(?<=\d)\.(?=\d)")


def canonical_model(name: object) -> str | None:
    """The one name of a model id (rules in the module docstring); None for no name."""
    if not isinstance(name, str) or not name.strip():
        return None
    s = name.strip().rstrip("/").rsplit("/", 1)[-1]
    s = _BEDROCK_REGION.sub("", s)
    vendor = _BEDROCK_VENDOR.match(s)
    if vendor:
        s = s[vendor.end():]
        s = _DATED_VERSION.sub(r"\1", s)
    m = _VERTEX.match(s)
    if m:
        s = f"{m['name']}-{m['date']}"
    if s.lower().startswith("claude"):
        s = _DOTTED.sub("-", s.lower())
        if s.endswith("-latest"):
            s = s[: -len("-latest")]
        s = CLAUDE_ALIASES.get(s, s)
    return s


def split_task_id(task_id: str) -> tuple[str, str | None]:
    """``(task, prefix)``: ``terminal-bench/hello-world`` -> ``("hello-world", "terminal-bench")``."""
    prefix, sep, task = str(task_id).rstrip("/").rpartition("/")
    if not sep or not task:
        return str(task_id), None
    return task, prefix
