"""Applications: the command lines, the papermill pipeline, RESULTS.md and the notebook pairing check.

Nothing in the package imports this folder; each module runs one command.
"""
