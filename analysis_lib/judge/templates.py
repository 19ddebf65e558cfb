"""Prompt templates: one Markdown file per analysis in ``prompts/``, versioned in front matter.

A file holds YAML front matter (``name``, ``version``, ``description``) and ``# system`` /
``# user`` sections; ``$name`` placeholders are filled with :class:`string.Template`, whose
``$`` syntax leaves the JSON braces of prompts alone.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

PROMPTS_DIR = Path(__file__).with_name("prompts")
_SECTION = re.compile(r"^# (system|user)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class PromptTemplate:
    """A parsed template; ``render`` gives chat messages."""

    name: str
    version: str
    description: str
    sections: tuple[tuple[str, str], ...]  # (role, text) in file order

    def render(self, variables: dict[str, object]) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled; a missing variable raises KeyError."""
        values = {k: str(v) for k, v in variables.items()}
        return [{"role": role, "content": string.Template(text).substitute(values)} for role, text in self.sections]


def parse_template(text: str, source: str = "<string>") -> PromptTemplate:
    """Parse a template file's text; raises ValueError naming ``source`` when malformed."""
    if not text.startswith("---\n"):
        raise ValueError(f"{source}: prompt template must start with YAML front matter ('---')")
    try:
        _, front, body = text.split("---\n", 2)
    except ValueError:
        raise ValueError(f"{source}: unterminated front matter") from None
    meta = yaml.safe_load(front) or {}
    for key in ("name", "version"):
        if key not in meta:
            raise ValueError(f"{source}: front matter lacks '{key}'")
    parts = _SECTION.split(body)
    sections = tuple((parts[i], parts[i + 1].strip() + "\n") for i in range(1, len(parts) - 1, 2))
    if not sections:
        raise ValueError(f"{source}: no '# system' or '# user' section")
    return PromptTemplate(str(meta["name"]), str(meta["version"]), str(meta.get("description", "")), sections)


@cache
def load_template(name: str) -> PromptTemplate:
    """The packaged template ``prompts/<name>.md``."""
    path = PROMPTS_DIR / f"{name}.md"
    if not path.is_file():
        known = sorted(p.stem for p in PROMPTS_DIR.glob("*.md"))
        raise ValueError(f"unknown prompt template {name!r}; known: {', '.join(known)}")
    return parse_template(path.read_text(encoding="utf-8"), source=f"prompts/{name}.md")
