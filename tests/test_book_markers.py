"""The website shows code cells without the tools' markers (scripts/book_hide_markers.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from book_hide_markers import strip_markers  # noqa: E402


def test_nbval_marker_and_its_reason_line_are_hidden():
    cell = "# NBVAL_IGNORE_OUTPUT\n# wall-clock timings differ between runs\nprint(t)"
    assert strip_markers(cell) == "print(t)"


def test_solution_markers_are_hidden_and_the_code_between_kept():
    cell = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
    assert strip_markers(cell) == "def f():\n    return 1"


def test_a_cell_without_markers_is_unchanged_even_with_comments():
    cell = "# a comment a reader should see\nx = 1  # NBVAL is just a word here"
    assert strip_markers(cell) == cell
