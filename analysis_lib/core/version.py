"""The package version: one source, read by pyproject.toml, the plan record and the trials cache."""

__version__ = "0.1.0"
