"""Rewrite the README's metric reference from the metric registry (``analysis_lib/core/registry.py``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_lib.core.registry import reference_table  # noqa: E402

START, END = "<!-- metric-reference:start -->", "<!-- metric-reference:end -->"


def rendered(readme: str) -> str:
    """The README text with the block between the markers replaced by the registry's table."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        raise SystemExit(f"README.md: markers {START} / {END} not found")
    return pattern.sub(lambda _: f"{START}\n{reference_table()}\n{END}", readme)


if __name__ == "__main__":
    path = ROOT / "README.md"
    path.write_text(rendered(path.read_text(encoding="utf-8")), encoding="utf-8")
    print("README.md: metric reference rewritten from analysis_lib/core/registry.py")
