"""Content-addressed disk cache of judge answers (litellm 1.106.2's own disk cache crashes on hits).

Key = sha256 of the model, the prompt template's name and version, the rendered messages, the
response schema and the sample index; never an API key or the server address, so that a cache
can be shared and a key never leaks. Entries are written atomically, one JSON file each, so an
interrupted run resumes from what was already answered.

One cache serves every run of a user by default (:func:`default_cache_dir`), so the same
judgement is never paid twice, whatever the output folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..core.fileio import atomic_write_json, read_json
from ..core.trial import InputError


def cache_key(model: str, template_name: str, template_version: str, messages: list[dict], schema: dict, sample: int = 0) -> str:
    """Hex sha256 over the canonical JSON of everything that determines an answer."""
    payload = {
        "model": model,
        "template": template_name,
        "version": template_version,
        "messages": messages,
        "schema": schema,
        "sample": sample,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


ENV_VAR = "ANALYSIS_LIB_LLM_CACHE"


def default_cache_dir() -> Path:
    """``$ANALYSIS_LIB_LLM_CACHE``, else ``$XDG_CACHE_HOME/analysis_lib/llm``, else ``~/.cache/analysis_lib/llm``."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "analysis_lib" / "llm"


class ResponseCache:
    """One JSON file per key under ``root/<first two hex digits>/<key>.json``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record, or None when absent or unreadable (a broken entry is re-asked)."""
        p = self.path(key)
        if not p.is_file():
            return None
        try:
            rec = read_json(p, stage="llm-cache")
        except InputError:
            return None
        return rec if isinstance(rec, dict) and rec.get("key") == key else None

    def put(self, key: str, record: dict[str, Any]) -> None:
        atomic_write_json(self.path(key), {**record, "key": key})
