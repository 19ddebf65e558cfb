"""Times as sources write them (ISO 8601, ``Z`` or an offset, or naive), read one way everywhere."""

from __future__ import annotations

from datetime import datetime
from typing import Any

__all__ = ["parse_time"]


def parse_time(v: Any) -> datetime | None:
    """ISO 8601 text to datetime (``Z`` accepted); naive values are kept naive (local time in Harbor)."""
    if not isinstance(v, str) or not v:
        return None
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00") if v.endswith("Z") else v)
    except ValueError:
        return None
