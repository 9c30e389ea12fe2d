"""Chapter 7b's catch-rate matrix: every engine against every test, with its interval.

The battery in ``benchmarks/mutants.py`` stores, for each engine (the correct one and
each mutant) and each test, a catch rate and its Wilson 95% interval. A table of 48
``rate [lo, hi]`` strings hides the two things a reader needs: which cells are caught
and how wide each interval is (eight greedy-identity runs say far less than 500
first-token runs). So each cell is drawn as a short 0-to-1 track with the interval
as a bar and the rate as a dot, and a cell whose whole interval lies above
``caught_above`` is shaded: the test catches that engine in most seed-runs. The
correct engine's row is the false-alarm rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from specdec_lib.checks import check_real
from specdec_lib.course.plotting import COLORS, INK, new_figure

Row = Mapping[str, Any]

#: Horizontal margin inside a cell, so neighbouring tracks do not touch.
_PAD = 0.12
#: Slack for interval ends computed in floating point.
_EPS = 1e-9


def _cell(row: Row, key: str) -> tuple[float, float, float]:
    tests = row.get("tests")
    if not isinstance(tests, Mapping) or key not in tests:
        raise ValueError(f"rows: row {row.get('mutant')!r} has no result for test {key!r}")
    t = tests[key]
    try:
        rate = float(t["rate"])
        lo, hi = (float(x) for x in t["interval"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(
            f"rows: test {key!r} of {row.get('mutant')!r} needs a rate and a two-number interval"
        ) from err
    # Wilson bounds are computed in floating point: 1 may come back as 0.9999999999999999.
    if not -_EPS <= lo <= rate + _EPS and rate <= hi + _EPS and hi <= 1 + _EPS:
        raise ValueError(
            f"rows: test {key!r} of {row.get('mutant')!r} needs 0 <= lo <= rate <= hi <= 1, "
            f"got rate {rate} and interval [{lo}, {hi}]"
        )
    return rate, lo, hi


def plot_catch_matrix(
    rows: Sequence[Row],
    tests: Mapping[str, str],
    *,
    caught_above: float = 0.5,
    split_after: int | None = None,
) -> tuple[Figure, Axes]:
    """Draw the catch rate of every test (columns) on every engine (rows).

    ``rows`` are the stored battery's rows (``mutant`` and ``tests[key]`` with ``rate``
    and ``interval``), drawn top to bottom in order; ``tests`` maps each test's key to
    its column label. A cell is shaded when its interval's lower end exceeds
    ``caught_above``. ``split_after`` draws a vertical rule after that many columns
    (the course's own tests, then the ones the chapter adds). Returns ``(fig, ax)``.
    """
    if not rows:
        raise ValueError("rows must hold at least one engine")
    if not tests:
        raise ValueError("tests must name at least one test")
    caught_above = check_real(
        "caught_above", caught_above, "a number in (0, 1)", lambda v: 0 < v < 1
    )
    if split_after is not None and (
        isinstance(split_after, bool)
        or not isinstance(split_after, int)
        or not 0 < split_after < len(tests)
    ):
        raise ValueError(
            f"split_after must be an integer in [1, {len(tests) - 1}], got {split_after!r}"
        )
    names = [str(r.get("mutant", "")) for r in rows]
    if not all(names):
        raise ValueError("rows: every row needs a 'mutant' name")
    cells = [[_cell(r, key) for key in tests] for r in rows]

    n_rows, n_cols = len(rows), len(tests)
    fig, ax = new_figure(
        "test (dot: catch rate, 0 to 1; bar: its 95% interval)",
        "engine",
        figsize=(5.5, 0.42 * n_rows + 1.6),
    )
    width = 1 - 2 * _PAD
    for i, row_cells in enumerate(cells):
        y = n_rows - 1 - i
        for j, (rate, lo, hi) in enumerate(row_cells):
            if lo > caught_above:
                ax.axhspan(
                    y - 0.5,
                    y + 0.5,
                    j / n_cols,
                    (j + 1) / n_cols,
                    color=COLORS["highlight"],
                    alpha=0.18,
                    lw=0,
                )
            x0 = j + _PAD
            ax.plot([x0, x0 + width], [y, y], color="#c8c8c8", lw=1, solid_capstyle="butt")
            colour = COLORS["highlight"] if lo > caught_above else COLORS["baseline"]
            ax.plot(
                [x0 + width * lo, x0 + width * hi],
                [y, y],
                color=colour,
                lw=6,
                solid_capstyle="butt",
            )
            ax.plot(x0 + width * rate, y, "o", color=INK, ms=4, zorder=3)
    if split_after is not None:
        ax.axvline(split_after, color=INK, lw=1.2)
        for x, text in (
            (split_after / 2, "the course's tests"),
            ((split_after + n_cols) / 2, "added here"),
        ):
            ax.text(x, n_rows - 0.4, text, ha="center", va="bottom", fontsize=9, color=INK)
    ax.set_xlim(0, n_cols)
    ax.set_ylim(-0.5, n_rows - 0.5)
    ax.set_xticks([j + 0.5 for j in range(n_cols)])
    ax.set_xticklabels([label.replace(" ", "\n", 1) for label in tests.values()], fontsize=9)
    ax.set_yticks(range(n_rows))
    ax.set_yticklabels(list(reversed(names)), fontsize=9)
    ax.tick_params(length=0)
    ax.grid(False)
    for j in range(1, n_cols):
        ax.axvline(j, color="#e0e0e0", lw=0.8, zorder=0)
    for y in range(1, n_rows):
        ax.axhline(y - 0.5, color="#e0e0e0", lw=0.8, zorder=0)
    return fig, ax
