"""Tool taxonomy across agents, files touched by shell commands, and the error rule."""

from __future__ import annotations

import pytest

from analysis_lib.core.tools import categorize, files_touched, is_search_call, result_is_error, shell_files


@pytest.mark.parametrize(
    "name,args,expected",
    [
        ("Read", {"file_path": "a.py"}, "read"),  # Claude Code
        ("read_file", {"file_path": "a.py"}, "read"),  # gemini-cli
        ("str_replace_editor", {"command": "view", "path": "/a.py"}, "read"),  # OpenHands
        ("str_replace_editor", {"command": "str_replace", "path": "/a.py"}, "edit"),
        ("Grep", {"pattern": "x"}, "search"),
        ("Glob", {"pattern": "*.py"}, "search"),
        ("search_file_content", {"pattern": "x"}, "search"),
        ("Edit", {"file_path": "a.py"}, "edit"),
        ("MultiEdit", {"file_path": "a.py"}, "edit"),
        ("Write", {"file_path": "a.py"}, "edit"),
        ("replace", {"file_path": "a.py"}, "edit"),  # gemini-cli
        ("apply_patch", {"input": ""}, "edit"),  # Codex
        ("Bash", {"command": "ls"}, "execute"),
        ("run_shell_command", {"command": "ls"}, "execute"),
        ("bash_command", {"keystrokes": "ls\n"}, "execute"),  # Terminus
        ("execute_bash", {"command": "ls"}, "execute"),  # OpenHands
        ("mcp__codegraph__get_dependencies", {}, "mcp"),
        ("search_code", {}, "mcp"),  # configured MCP base name
        ("TodoWrite", {}, "other"),
        ("mark_task_complete", {}, "other"),
    ],
)
def test_categorize(name, args, expected):
    assert categorize(name, args) == expected


@pytest.mark.parametrize(
    "cmd,reads,edits,searched",
    [
        ("cat src/a.py", ["src/a.py"], [], False),
        ("head -n 20 a.py && tail b.py", ["a.py", "b.py"], [], False),
        ("sed -i 's/a/b/' src/x.py", [], ["src/x.py"], False),
        ("sed -n '1,20p' src/x.py", ["src/x.py"], [], False),
        ("echo hi > out.txt; echo more >> log.txt", [], ["out.txt", "log.txt"], False),
        ("grep -rn foo src | head", [], [], True),
        ("cat <<'EOF' > new.py\nprint(1) > 2\nEOF", [], ["new.py"], False),
        ("python run.py 2>/dev/null", [], [], False),
        ("cp a.py b.py", ["a.py"], ["b.py"], False),
        ("find . -name '*.py'", [], [], True),
    ],
)
def test_shell_files(cmd, reads, edits, searched):
    r, e, s = shell_files(cmd)
    assert (r, e, s) == (reads, edits, searched)


def test_apply_patch_envelope_files():
    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Add File: src/b.py\n+z\n*** End Patch"
    assert files_touched("apply_patch", {"input": patch}) == ([], ["src/a.py", "src/b.py"])
    assert files_touched("Bash", {"command": f"apply_patch <<'EOF'\n{patch}\nEOF"}) == ([], ["src/a.py", "src/b.py"])


def test_search_calls_include_shell_grep():
    assert is_search_call("Grep", {"pattern": "x"})
    assert is_search_call("Bash", {"command": "rg foo"})
    assert not is_search_call("Bash", {"command": "pytest"})


def test_error_rule():
    assert result_is_error("Bash", "all good", {"is_error": True})  # producer's mark wins
    assert not result_is_error("Bash", "Error: looks bad but marked fine", {"is_error": False})
    assert result_is_error("Read", "Error: file not found")
    assert result_is_error("Bash", "Traceback (most recent call last):\n  ...")
    assert result_is_error("run_shell_command", "Output: x\nError: (none)\nExit Code: 2")
    assert not result_is_error("run_shell_command", "Output: x\nError: (none)\nExit Code: 0")
    assert result_is_error("bash_command", "bash: hexdump: command not found")
    assert not result_is_error("Read", "def error_handler(): pass")
