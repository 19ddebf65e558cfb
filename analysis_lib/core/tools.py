"""Tool taxonomy: map every agent's tool names onto read / search / edit / execute / mcp / other.

Agents name the same action differently (Claude Code ``Read``, gemini-cli ``read_file``,
OpenHands ``str_replace_editor view``, Terminus ``bash_command``). This module gives one
category per call, the files a call reads or edits (also from shell commands: ``cat``,
``sed -i``, redirections, ``tee``, ``apply_patch`` heredocs ...), and the error rule.

What counts as a tool error: the producer's own mark wins (ATIF observation
``extra.is_error`` / ``is_error`` / ``status == "error"``, Claude ``tool_result.is_error``,
Inspect ``error``). Without a mark, a result counts as an error when it starts with
``Error``/``ERROR:``/``<tool_use_error>``/``Traceback (most recent call last)``, or when a
shell result reports a non-zero exit code (``Exit Code: 2``, ``exit code 2``,
``returncode: 2``); ``command not found`` in a shell result also counts (these two only for
execute, MCP and uncategorised tools, not for the output of a read, search or edit).
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterable, Sequence
from typing import Any

DEFAULT_MCP_TOOLS = frozenset(
    {"canvas", "init_repository", "get_dependencies", "search_code", "list_entrypoints", "show_call_graph_neighborhood"}
)

_READ = {
    "read", "read_file", "readfile", "view", "view_file", "open_file", "file_read", "notebookread", "read_many_files",
    "readmanyfiles", "cat", "get_file", "read_notebook",
    "open", "goto", "scroll_up", "scroll_down",  # SWE-agent's file viewer
}
_SEARCH = {
    "grep", "glob", "search_file_content", "search", "find_file", "find_files", "search_dir", "search_file", "ls",
    "list_directory", "list_dir", "list_files", "codebase_search", "file_search", "grep_search", "websearch",
    "web_search", "google_web_search", "webfetch", "web_fetch", "find",
}
_EDIT = {
    "edit", "multiedit", "write", "notebookedit", "write_file", "replace", "edit_file", "create_file", "apply_patch",
    "str_replace", "insert", "create", "str_replace_based_edit_tool", "write_to_file", "patch",
}
_EXECUTE = {
    "bash", "run_shell_command", "shell", "bash_command", "execute_bash", "exec_command", "local_shell",
    "run_terminal_cmd", "execute_ipython_cell", "bashoutput", "killshell", "run_command", "execute_command",
    "python", "terminal", "ipython", "container.exec",
}
# Editor tools whose action is chosen by a ``command`` argument (OpenHands, SWE-agent, Anthropic).
_EDITOR_TOOLS = {"str_replace_editor", "str_replace_based_edit_tool", "text_editor", "editor"}

_PATH_KEYS = ("file_path", "path", "absolute_path", "filename", "file", "target_file", "notebook_path", "relative_path")


# Claude Code's answer in place of a tool result when ``claude -p`` may not ask for permission.
PERMISSION_DENIAL_PREFIX = "Claude requested permissions to "
# Tools that load the schemas of deferred tools (Claude Code defers MCP tools behind ToolSearch).
DISCOVERY_TOOLS = frozenset({"ToolSearch"})


def is_permission_denial(text: str | None) -> bool:
    """True for Claude Code's result of a call it refused for lack of permission: the tool never ran."""
    return isinstance(text, str) and text.startswith(PERMISSION_DENIAL_PREFIX)


def is_discovery(name: str) -> bool:
    """A tool-discovery call (``ToolSearch``): loads other tools' schemas, does no work on the task."""
    return name in DISCOVERY_TOOLS


def discovers_mcp(arguments: dict[str, Any] | None) -> bool:
    """A discovery call that selects or searches MCP tools (``select:mcp__server__tool``)."""
    return "mcp__" in str((arguments or {}).get("query", ""))


def base_name(name: str) -> str:
    """The tool's own name without an MCP ``mcp__server__`` prefix or a ``server.`` namespace."""
    if name.startswith("mcp__"):
        return name.split("__")[-1]
    return name


def is_mcp(name: str, mcp_tools: Iterable[str] = DEFAULT_MCP_TOOLS) -> bool:
    """MCP call: the ``mcp__`` prefix, or one of the configured MCP tool base names."""
    if name.startswith("mcp__"):
        return True
    tools = mcp_tools if isinstance(mcp_tools, (set, frozenset)) else set(mcp_tools)
    return base_name(name) in tools


def categorize(name: str, arguments: dict[str, Any] | None = None, mcp_tools: Iterable[str] = DEFAULT_MCP_TOOLS) -> str:
    """Category of a call: read, search, edit, execute, mcp or other."""
    tools = mcp_tools if isinstance(mcp_tools, frozenset) else frozenset(mcp_tools)
    cat = name_category(name, tools)
    if cat is None:  # an editor tool: the action is in the arguments
        cmd = str((arguments or {}).get("command", "")).lower()
        return "read" if cmd == "view" else "edit"
    return cat


@functools.lru_cache(maxsize=4096)  # called for every tool call; names repeat
def name_category(name: str, mcp_tools: frozenset[str]) -> str | None:
    """Category of a call by its tool's name alone; None for an editor tool, whose action is in the
    arguments (then use :func:`categorize`)."""
    if is_mcp(name, mcp_tools):
        return "mcp"
    key = name.lower()
    if key in _EDITOR_TOOLS:
        return None
    if key in _READ:
        return "read"
    if key in _SEARCH:
        return "search"
    if key in _EDIT:
        return "edit"
    if key in _EXECUTE:
        return "execute"
    return "other"


def shell_command(name: str, arguments: dict[str, Any]) -> str | None:
    """The shell text of an execute call (Bash ``command``, Terminus ``keystrokes``, Codex ``cmd`` list)."""
    for k in ("command", "cmd", "keystrokes", "code", "script"):
        v = arguments.get(k)
        if isinstance(v, str):
            return v
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            # Codex: ["bash", "-lc", "cat x"] -> the script, else the joined argv.
            if len(v) >= 3 and v[0].endswith("sh") and v[1] in ("-lc", "-c"):
                return v[2]
            return shlex.join(v)
    return None


def _arg_path(arguments: dict[str, Any]) -> str | None:
    for k in _PATH_KEYS:
        v = arguments.get(k)
        if isinstance(v, str) and v:
            return v
    return None


_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$|^\+\+\+ (?:b/)?(.+)$", re.M)
_SEGMENT_SPLIT = re.compile(r"\|\||&&|;|\||\n")
_REDIRECT = re.compile(r"(?<![0-9&<])>>?\s*([^\s;|&<>]+)")
_READ_CMDS = {"cat", "head", "tail", "less", "more", "nl", "bat", "view", "wc", "diff", "sort", "uniq", "awk"}
_SEARCH_CMDS = {"grep", "rg", "ag", "ack", "find", "fd", "ls", "tree", "git grep"}
_VALUE_FLAGS = {"head": ("-n", "-c"), "tail": ("-n", "-c"), "sed": ("-e",), "awk": ("-F", "-v"), "sort": ("-k", "-t")}
_NOT_FILES = {"/dev/null", "/dev/stdout", "/dev/stderr", "-"}


def patch_files(text: str) -> list[str]:
    """Files named by an apply_patch envelope or a unified diff."""
    out = []
    for m in _PATCH_FILE.finditer(text):
        f = (m.group(1) or m.group(2) or "").strip()
        if f and f != "/dev/null":
            out.append(f)
    return out


def _words(seg: str) -> list[str]:
    # shlex is slow; most commands need no quote handling.
    if "'" not in seg and '"' not in seg and "\\" not in seg:
        return seg.split()
    try:
        return shlex.split(seg, posix=True)
    except ValueError:
        return seg.split()


def shell_files(command: str) -> tuple[list[str], list[str], bool]:
    """Files a shell command reads and edits, and whether it searches (see :func:`_shell_files`)."""
    r, e, s = _shell_files(command)
    return list(r), list(e), s


@functools.lru_cache(maxsize=8192)  # agents repeat the same commands; parsing is the costly part
def _shell_files(command: str) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """Files a shell command reads and edits, and whether it searches (grep, find, rg ...).

    A heuristic over common commands: ``cat/head/tail/sed -n`` read their file operands;
    ``sed -i``, ``tee``, ``cp/mv`` targets, ``touch``, ``>``/``>>`` redirections and
    ``apply_patch``/``patch`` envelopes edit. Quoted heredoc bodies are not parsed as commands.
    """
    reads: list[str] = []
    edits: list[str] = []
    searched = False
    if "*** Begin Patch" in command or "\n+++ " in command:
        edits.extend(patch_files(command))
    # Heredoc bodies are data, not commands: keep only the first line of each.
    head = re.sub(r"(<<-?\s*['\"]?(\w+)['\"]?[^\n]*)\n.*?\n\2\b", r"\1", command, flags=re.S)
    for m in _REDIRECT.finditer(head):
        target = m.group(1).strip("'\"")
        if target not in _NOT_FILES and not target.startswith("&"):
            edits.append(target)
    for seg in _SEGMENT_SPLIT.split(head):
        seg = _REDIRECT.sub(" ", seg).strip()
        if not seg:
            continue
        words = _words(seg)
        while words and (("=" in words[0] and not words[0].startswith("-")) or words[0] in ("sudo", "time", "env", "nohup")):
            words = words[1:]
        if not words:
            continue
        cmd, rest = words[0].rsplit("/", 1)[-1], words[1:]
        operands = []
        skip = False
        for w in rest:
            if skip:
                skip = False
            elif w in _VALUE_FLAGS.get(cmd, ()):
                skip = True  # the flag's value is not a file
            elif not w.startswith(("-", "<")):
                operands.append(w)
        if cmd in _SEARCH_CMDS or (cmd == "git" and rest[:1] == ["grep"]):
            searched = True
        elif cmd == "sed":
            # The script is the first operand unless given with -e.
            files = operands if "-e" in rest else operands[1:]
            if any(w == "-i" or w.startswith("-i") or w == "--in-place" for w in rest):
                edits.extend(files)
            else:
                reads.extend(files)
        elif cmd in _READ_CMDS:
            if cmd == "awk":
                operands = operands[1:]
            reads.extend(operands)
        elif cmd == "tee":
            edits.extend(operands)
        elif cmd in ("cp", "mv") and len(operands) >= 2:
            reads.extend(operands[:-1])
            edits.append(operands[-1])
        elif cmd in ("touch", "rm", "truncate"):
            edits.extend(operands)
        elif cmd in ("apply_patch", "patch"):
            pass  # files come from the envelope above
    return _paths(reads), _paths(edits), searched


def _paths(words: list[str]) -> tuple[str, ...]:
    """The words of a shell command that name files (not options' placeholders or variables)."""
    return tuple(x for x in words if x and x not in _NOT_FILES and not x.startswith("$"))


def call_effects(name: str, arguments: dict[str, Any], category: str) -> tuple[Sequence[str], Sequence[str], bool]:
    """``(read paths, edited paths, searched)`` of one call of a known category, in one pass.

    The metrics loop asks all three of every call; a shell command is parsed (from the cache)
    once for them. The sequences may be shared: do not modify them.
    """
    if category == "read":
        paths = arguments.get("paths") or arguments.get("file_paths")
        if isinstance(paths, list):
            return [str(x) for x in paths if isinstance(x, str)], (), False
        p = _arg_path(arguments)
        return ((p,) if p else ()), (), False
    if category == "edit":
        if name.lower() in ("apply_patch", "patch"):
            text = arguments.get("input") or arguments.get("patch") or ""
            return (), patch_files(str(text)), False
        p = _arg_path(arguments)
        return (), ((p,) if p else ()), False
    if category == "execute":
        cmd = shell_command(name, arguments)
        if cmd:
            return _shell_files(cmd)
        return (), (), False
    return (), (), category == "search"


def files_touched(name: str, arguments: dict[str, Any], category: str | None = None) -> tuple[list[str], list[str]]:
    """``(read paths, edited paths)`` of one call, from its arguments or its shell command."""
    reads, edits, _ = call_effects(name, arguments, category or categorize(name, arguments))
    return list(reads), list(edits)


def is_search_call(name: str, arguments: dict[str, Any], category: str | None = None) -> bool:
    """A search call: a search tool, or a shell command running grep, rg, find, ls ..."""
    return call_effects(name, arguments, category or categorize(name, arguments))[2]


_EXIT = re.compile(r"(?:exit code|exit_code|returncode|exit status)\s*[:=]?\s*(-?\d+)", re.I)
_ERROR_START = ("error", "<tool_use_error>", "traceback (most recent call last)", "fatal:", "exception:")
_ERROR_FIRST = frozenset("eEtTfF<")  # every character c with c.lower()[0] in "et<f" (checked over all of Unicode)
_BLANKS = frozenset(" \t\r\n")


def result_is_error(name: str, text: str, extra: dict[str, Any] | None = None, raw: dict[str, Any] | None = None) -> bool:
    """Whether a tool result is an error (see the module docstring for the rule)."""
    # Called for every tool result: searches with bounds instead of slicing copies of the text.
    if extra:
        mark = _mark(extra)
        if mark is not None:
            return mark
    if raw:
        mark = _mark(raw)
        if mark is not None:
            return mark
    n = len(text)
    i = 0
    if text[:1] in _BLANKS:  # at most 80 leading blanks are skipped
        head = text[:120]
        i = min(80, len(head) - len(head.lstrip(" \t\r\n")))
    # Only these characters lower-case to the first letter of an error start: most results are
    # ruled out by their first character, without lower-casing a slice.
    if text[i:i + 1] in _ERROR_FIRST and text[i:i + 40].lower().startswith(_ERROR_START):
        return True
    if name_category(name, DEFAULT_MCP_TOOLS) not in ("execute", "other", "mcp"):
        return False  # exit codes and "command not found" are shell output: not looked for in a file read
    # Exit codes sit at the end (gemini-cli, Codex) or the start of shell output; look only there.
    # One scan of both windows first: most outputs name no exit code (half the cost of four finds).
    ends = text if n <= 400 else text[:200] + "\n" + text[-200:]
    if "xit" in ends or "returncode" in ends:
        for lo, hi in ((max(0, n - 200), n), (0, min(n, 200))):
            if text.find("xit", lo, hi) >= 0 or text.find("returncode", lo, hi) >= 0:
                m = _EXIT.search(text, lo, hi)
                if m and m.group(1) != "0":
                    return True
    return text.find("command not found", 0, 2000) >= 0


def _mark(src: dict[str, Any]) -> bool | None:
    v = src.get("is_error")
    if v is not None:
        return bool(v)
    if src.get("status") in ("error", "failed"):
        return True
    return None
