"""Manifest v2: the shipped example validates; every kind of mistake names the file and JSON path."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from analysis_lib.bench.manifest import ManifestError, load_manifest, manifest_sha256, parse_manifest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "params" / "example_manifest.json"


def test_example_manifest_is_valid():
    m = load_manifest(EXAMPLE)
    assert len(m.tasks) >= 3
    assert [c.name for c in m.conditions] == ["text", "codegraph"]
    assert m.conditions[0].settings.mcp_config is None and m.conditions[1].settings.mcp_config
    assert all(t.evaluation and t.evaluation.type == "command_json" for t in m.tasks)
    # the MCP config it points at ships beside it
    assert Path(m.resolve(m.conditions[1].settings.mcp_config)).is_file()


def _base() -> dict:
    return json.loads(EXAMPLE.read_text())


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda o: o["tasks"][1].pop("instruction"), "tasks[1].instruction: Field required"),
        (lambda o: o["tasks"][0]["evaluation"].update(type="shell"), "tasks[0].evaluation.type"),
        (lambda o: o["tasks"][2]["evaluation"].update(command=[]), "tasks[2].evaluation.command: must name a program"),
        (
            lambda o: o["conditions"][1]["settings"].update(mcp_confg="x.json"),
            "conditions[1].settings.mcp_confg: Extra inputs are not permitted",
        ),
        (lambda o: o["conditions"][0].update(adapter="cursor"), "conditions[0]"),
        (lambda o: o["conditions"].pop(), "conditions: List should have at least 2 items"),
        (lambda o: o["tasks"][1].update(id=o["tasks"][0]["id"]), "duplicate name(s)"),
        (lambda o: o["tasks"][0].update(id="org/task"), "tasks[0].id: must not contain '/'"),
        (lambda o: o["environment"].pop("model"), "environment.model: Field required"),
        (lambda o: o["tasks"][0].update(timeout_seconds=-1), "tasks[0].timeout_seconds"),
    ],
)
def test_invalid_manifests_name_the_json_path(tmp_path, mutate, expected):
    obj = copy.deepcopy(_base())
    mutate(obj)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(obj))
    with pytest.raises(ManifestError) as ei:
        load_manifest(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}: invalid manifest")
    assert expected in msg


def test_version_and_file_errors(tmp_path):
    obj = _base()
    obj["manifest_version"] = 1
    p = tmp_path / "v1.json"
    p.write_text(json.dumps(obj))
    with pytest.raises(ManifestError, match=r"v1.json: manifest_version: expected 2, got 1"):
        load_manifest(p)
    broken = tmp_path / "broken.json"
    broken.write_text('{"manifest_version": 2, "tasks": [')
    with pytest.raises(ManifestError, match=r"broken.json: truncated JSON"):
        load_manifest(broken)
    with pytest.raises(ManifestError, match=r"missing.json: file not found"):
        load_manifest(tmp_path / "missing.json")
    with pytest.raises(ManifestError, match="expected a JSON object"):
        parse_manifest([1, 2], "list.json")


def test_shell_metacharacters_are_a_valid_task_id_and_string_commands_are_split_with_shlex():
    obj = _base()
    obj["tasks"][0]["id"] = "a;touch pwned$(id)"
    obj["tasks"][0]["evaluation"]["command"] = "python -m mod --name 'two words' {task_id}"
    m = parse_manifest(obj, "x.json")
    assert m.tasks[0].id == "a;touch pwned$(id)"
    assert m.tasks[0].evaluation.command == ["python", "-m", "mod", "--name", "two words", "{task_id}"]


def test_manifest_hash_tracks_content_not_formatting(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(_base()))
    b = tmp_path / "b.json"
    b.write_text(json.dumps(_base(), indent=4))
    assert manifest_sha256(load_manifest(a)) == manifest_sha256(load_manifest(b))
    obj = _base()
    obj["tasks"][0]["commit"] = "v2.32.0"
    b.write_text(json.dumps(obj))
    assert manifest_sha256(load_manifest(a)) != manifest_sha256(load_manifest(b))
