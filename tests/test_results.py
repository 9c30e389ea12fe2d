"""Stored benchmark results ship with the library and are read wherever a chapter runs.

A chapter reads a slow measurement with ``load_result(name)``; the file is package data,
``specdec_lib/results/<name>.json`` (read through ``importlib.resources``), so a student
notebook copied out of the repository finds it. A missing or malformed file stops with
an error naming the file and the command that writes it.
"""

from __future__ import annotations

import json
import re
import types
from importlib import resources
from pathlib import Path

import pytest

from specdec_lib.analysis import results as R
from specdec_lib.analysis.results import RESULTS_DIR, load_result, writer

ROOT = Path(__file__).resolve().parents[1]
STORED = sorted(p.stem for p in RESULTS_DIR.glob("*.json"))


@pytest.fixture
def package_root(tmp_path, monkeypatch):
    """``load_result`` reading a stand-in package folder, ``tmp_path``, instead of the library."""
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(R, "resources", types.SimpleNamespace(files=lambda package: tmp_path))
    return tmp_path


def test_the_stored_results_are_package_data_read_from_any_working_directory(tmp_path, monkeypatch):
    assert Path(str(resources.files("specdec_lib") / "results")) == RESULTS_DIR
    assert {"trees", "tree_timing", "chapter_times", "training_runs"} <= set(STORED)
    monkeypatch.chdir(tmp_path)  # no benchmarks/ or specdec_lib/ anywhere above
    assert load_result("trees") == json.loads((RESULTS_DIR / "trees.json").read_text())


def test_pyproject_ships_the_results_as_package_data():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"results/*.json"' in pyproject


def test_a_missing_result_names_the_file_and_the_script_that_writes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        load_result("trees_rerun")
    message = str(error.value)
    assert "trees_rerun.json" in message
    assert "python benchmarks/trees.py --out specdec_lib/results/trees_rerun.json" in message
    with pytest.raises(FileNotFoundError, match="did you mean 'trees'"):
        load_result("tree")


def test_the_rerun_hint_is_the_command_the_stored_result_records():
    # batch_sweep_copy was run with --scenarios copy, which no file name says
    recorded = json.loads((RESULTS_DIR / "batch_sweep_copy.json").read_text())["command"]
    assert "--scenarios copy" in recorded
    hint = writer("batch_sweep_copy")
    assert hint.startswith("python benchmarks/batch_sweep.py --scenarios copy --batch-sizes")
    assert hint.endswith(" --out specdec_lib/results/batch_sweep_copy.json")
    assert hint.count("--out") == 1  # the recorded --out (a folder since moved) is replaced
    assert writer("hf_profile").endswith("--seed 1121")  # its own file: no --out


def test_a_result_missing_from_an_installation_is_a_file_not_found_error(package_root):
    with pytest.raises(FileNotFoundError, match=r"wall_clock\.json.*benchmarks/wall_clock\.py"):
        load_result("wall_clock")


def test_a_malformed_result_is_a_value_error_naming_the_file(package_root):
    (package_root / "results" / "tree_timing.json").write_text('{"rows": [1, 2', encoding="utf-8")
    with pytest.raises(ValueError) as error:
        load_result("tree_timing")
    message = str(error.value)
    assert str(package_root / "results" / "tree_timing.json") in message
    assert "not valid JSON" in message and "python benchmarks/tree_timing.py" in message
    assert not isinstance(error.value, json.JSONDecodeError)  # ours, with the file named


def _command_script(result: dict) -> str | None:
    """The script a stored result says it came from (its recorded ``command``), if any."""
    command = result.get("command") or result.get("stamp", {}).get("command")
    if not command:
        return None
    found = re.search(r"\b((?:benchmarks|scripts)/\w+\.py)\b", command)
    return found.group(1) if found else None


@pytest.mark.parametrize("name", STORED)
def test_every_stored_result_names_a_writer_that_exists(name):
    command = writer(name)
    script = re.search(r"\b((?:benchmarks|scripts)/\w+\.py)\b", command)
    if script is None:
        module = re.search(r"python -m ([\w.]+)", command).group(1)
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), command
        return
    assert (ROOT / script.group(1)).is_file(), command
    recorded = _command_script(json.loads((RESULTS_DIR / f"{name}.json").read_text()))
    assert recorded in (None, script.group(1)), (name, recorded, command)


def test_nothing_reads_or_writes_the_old_results_folder():
    old = "benchmarks" + "/results"
    old_parts = '"benchmarks" / ' + '"results"'
    offenders = []
    for folder in ("benchmarks", "scripts", "tests", "specdec_lib", ".ci", "binder"):
        for path in (ROOT / folder).rglob("*"):
            if not path.is_file() or path.suffix not in {".py", ".sh", ".txt", ".mjs", ""}:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if old in text or old_parts in text:
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"still using {old}: {offenders}"
