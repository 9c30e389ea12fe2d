"""The benchmarks' harness (``benchmarks/harness.py``): options, stamp, intervals, writing;
and a few benchmarks run end to end in their ``--small`` form."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from specdec_lib.analysis.results import RESULTS_DIR

import harness
from harness import Benchmark, binomial_interval, command_line, interval, rate

ROOT = Path(__file__).resolve().parent.parent


def _bench(**options) -> Benchmark:
    bench = Benchmark("made_up", "A made-up benchmark.\n\nMore.", **options)
    bench.add("--prompts", type=int, default=8)
    return bench


def test_the_binomial_interval_holds_the_rate_and_refuses_bad_counts():
    low, high = binomial_interval(3, 10)
    assert low < 0.3 < high and 0 < low and high < 1
    assert binomial_interval(0, 20)[0] == 0 and binomial_interval(20, 20)[1] == 1
    wider = binomial_interval(3, 10, level=0.99)
    assert wider[0] < low and wider[1] > high
    with pytest.raises(ValueError, match="k must lie"):
        binomial_interval(5, 4)
    with pytest.raises(ValueError, match="level"):
        binomial_interval(1, 4, level=1.0)
    assert rate([True, False, False, True]) == {
        "caught": 2,
        "runs": 4,
        "rate": 0.5,
        "interval": binomial_interval(2, 4),
    }


def test_an_estimate_becomes_a_rounded_dict_with_its_level_when_asked():
    e = types.SimpleNamespace(value=1.23456, low=1.1, high=1.3, level=0.95)
    assert interval(e) == {"value": 1.2346, "low": 1.1, "high": 1.3}
    assert interval(e, digits=None, level=True)["level"] == 0.95


def test_the_default_output_is_the_stored_result_and_a_quick_check_needs_its_own(capsys):
    args = _bench().parse([])
    assert args.out == RESULTS_DIR / "made_up.json" and args.prompts == 8
    small = {"prompts": 2}
    with pytest.raises(SystemExit):
        _bench(small=small).parse(["--small"])
    assert "--small needs --out" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # naming the stored result itself is no better
        _bench(small=small).parse(["--small", "--out", str(RESULTS_DIR / "made_up.json")])
    args = _bench(small=small).parse(["--small", "--out", "/tmp/x.json"])
    assert args.prompts == 2 and args.out == Path("/tmp/x.json")
    other = _bench().parse([], out=lambda a: f"made_up_{a.prompts}")
    assert other.out == RESULTS_DIR / "made_up_8.json"


def test_blocks_default_to_one_per_repeat_and_need_a_spread():
    assert _bench(repeats=6, blocks=True).parse([]).blocks == 6
    assert _bench(repeats=6, blocks=True).parse(["--blocks", "3"]).blocks == 3
    for bad in ("1", "7"):
        with pytest.raises(SystemExit):
            _bench(repeats=6, blocks=True).parse(["--blocks", bad])


def test_a_saved_result_carries_its_command_stamp_and_seconds(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "r.json"
    bench = _bench(strict=True)
    bench.parse(["--prompts", "3", "--out", str(out)])
    written = bench.save({"rows": [1]})
    stored = json.loads(out.read_text())
    assert stored == written and stored["rows"] == [1]
    assert stored["command"].startswith("OMP_NUM_THREADS=1 python ")
    assert stored["command"].endswith(f"--prompts 3 --out {out}")
    assert {"commit", "cpu", "load_average_at_start"} <= set(stored["stamp"])
    assert stored["seconds"] >= 0
    speed = stored["speed"]  # the machine-speed probe at start and end
    assert speed["start_ms"] > 0 and speed["end_ms"] > 0
    assert speed["change"] == round(speed["end_ms"] / speed["start_ms"] - 1, 3)
    bench.args.strict = True
    with pytest.raises(SystemExit, match="--strict"):
        bench.save({"load": {"busy": True}})
    with pytest.raises(ValueError, match="parse"):
        _bench().save({})
    assert bench.load(wall=[1.0, 1.0], cpu=[1.0, 1.0])["jobs"] == 2
    with pytest.raises(ValueError, match="timed, or wall and cpu"):
        bench.load(wall=[1.0])


def test_a_speed_that_moved_by_more_than_the_allowed_share_is_reported_as_drifting():
    assert not harness.speed_report(10.0, 11.0)["drifted"]
    assert harness.speed_report(10.0, 12.0) == {
        "start_ms": 10.0,
        "end_ms": 12.0,
        "change": 0.2,
        "drifted": True,
    }
    assert harness.speed_report(10.0, 8.0)["drifted"]  # faster counts too


def test_the_command_line_is_written_from_the_repository_root(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    script = str(ROOT / "benchmarks" / "trees.py")
    assert (
        command_line([script, "--out", "a b.json"]) == "python benchmarks/trees.py --out 'a b.json'"
    )
    assert harness.ROOT == ROOT


@pytest.mark.parametrize("name", ["copy_accuracy", "trees", "engine_speed"])
def test_a_benchmark_runs_end_to_end_in_its_small_form(name, tmp_path):
    out = tmp_path / f"{name}.json"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), "--small", "--out", str(out)],
        check=True,
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
        capture_output=True,
    )
    result = json.loads(out.read_text())
    assert f"benchmarks/{name}.py --small --out {out}" in result["command"]
    assert "commit" in result["stamp"] and result["seconds"] > 0


def test_the_trees_benchmark_picks_the_likeliest_nodes_each_with_its_parent_and_elder():
    from trees import best_shape

    hits = np.array([[0.8, 0.1], [0.5, 0.2]])  # hits[depth][rank]
    shape, value = best_shape(hits, 3)
    assert shape.paths == ((0,), (0, 0), (0, 1)) and value == pytest.approx(0.8 + 0.4 + 0.16)
    shape, value = best_shape(hits, 5)  # then the root's second child, then its child
    assert set(shape.paths) == {(0,), (0, 0), (0, 1), (1,), (1, 0)}
    assert value == pytest.approx(1.36 + 0.1 + 0.05)
    with pytest.raises(ValueError, match="n_nodes"):
        best_shape(hits, 7)
