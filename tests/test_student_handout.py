"""Student notebooks run as a hand-out: copied alone into an empty folder outside the clone.

A teacher hands out the generated student notebooks; a student runs them with only the
library installed, from whatever folder they were copied to. ``python scripts/coursework.py
check`` does exactly that for all 17 notebooks: it generates them, copies them into a fresh
temporary folder outside the repository and runs each there, passing only when the stubs'
``NotImplementedError`` is the only error raised. That takes several minutes, so CI runs it
once (``.ci/run``, ``OMP_NUM_THREADS=1 python scripts/coursework.py check``) and this test
runs the same code path, ``coursework.check_student_notebooks``, on a fast representative
subset: chapter 12, whose import cell once died with ``FileNotFoundError`` outside a clone
(the stored results were looked for in the working directory), and appendix A, which also
reads a stored result. Each cell has a timeout.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import coursework as C  # noqa: E402

SUBSET = ["12_trees_and_heads", "appendix_a_training_tinygpt"]
CELL_TIMEOUT = 300  # seconds; each notebook takes well under a minute on one core


def test_student_notebooks_run_in_an_empty_folder_outside_the_repository(tmp_path, capsys):
    handout = tmp_path / "handout"
    assert ROOT not in handout.resolve().parents, "tmp_path must be outside the repository"
    problems = C.check_student_notebooks(names=SUBSET, workdir=handout, timeout=CELL_TIMEOUT)
    out = capsys.readouterr().out
    assert not problems, "\n".join(problems)
    assert f"running 2 student notebooks in {handout.resolve()}" in out
    assert {f"{name}.ipynb" for name in SUBSET} <= {p.name for p in handout.iterdir()}
    reported = {}
    for name in SUBSET:  # both ran to the end: no stub stopped them
        line = next(x for x in out.splitlines() if x.startswith(f"{name}.ipynb:"))
        found = re.search(r" (\d+) cells stopped at a stub, (\d+) checks? reported", line)
        assert found and found[1] == "0", line
        reported[name] = int(found[2])
    assert reported["12_trees_and_heads"] == 2, reported  # its two checks ran, unattempted


def test_the_hand_out_folder_must_be_empty_and_outside_the_repository(tmp_path):
    with pytest.raises(ValueError, match="inside the repository"):
        C.handout_folder(ROOT / "chapters")
    (tmp_path / "left_over.txt").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        C.handout_folder(tmp_path)
    assert C.handout_folder(tmp_path / "new") == (tmp_path / "new").resolve()


def test_check_refuses_a_chapter_that_does_not_exist(tmp_path):
    with pytest.raises(ValueError, match="no_such_chapter"):
        C.check_student_notebooks(names=["no_such_chapter"], workdir=tmp_path / "h")
