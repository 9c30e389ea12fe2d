"""The helpers chapters call: figure style, glue, show_source, the round-by-round display."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from specdec_lib import Tokenizer, speculative_generate  # noqa: E402
from specdec_lib.course.notebook import (  # noqa: E402
    GLUE_DIGITS,
    _plain,
    glue,
    power_of_ten_above,
    rounded,
    show_source,
    skip_unattempted,
)
from specdec_lib.course.plotting import new_figure, use_course_style  # noqa: E402
from specdec_lib.course.rounds_view import render_rounds  # noqa: E402
from specdec_lib.text.language import LEXICON  # noqa: E402

from helpers import check_figure, pick, shown  # noqa: E402


@pytest.fixture
def course_style():
    saved = matplotlib.rcParams.copy()
    use_course_style()
    yield
    matplotlib.rcParams.update(saved)
    plt.close("all")


def rec(tok: Tokenizer, proposed: str, n_accepted: int, emitted: str) -> SimpleNamespace:
    return SimpleNamespace(
        proposed=tok.encode(proposed), n_accepted=n_accepted, emitted=tok.encode(emitted)
    )


# --- plotting ------------------------------------------------------------------------------


def test_course_figures_are_opaque_white_and_labelled(course_style):
    fig, ax = new_figure("draft length k (tokens)", "tokens per target pass")
    assert fig.get_facecolor() == (1.0, 1.0, 1.0, 1.0)
    assert ax.get_facecolor() == (1.0, 1.0, 1.0, 1.0)
    assert matplotlib.rcParams["savefig.transparent"] is False
    check_figure(fig)


def test_new_figure_refuses_an_unlabelled_axis(course_style):
    with pytest.raises(ValueError, match="xlabel and ylabel"):
        new_figure("", "time (ms)")


def test_check_figure_catches_an_unlabelled_axis_and_a_transparent_background(course_style):
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="unlabelled"):
        check_figure(fig)
    ax.set_xlabel("x (s)")
    ax.set_ylabel("y (ms)")
    fig.patch.set_alpha(0.0)
    with pytest.raises(ValueError, match="opaque"):
        check_figure(fig)


# --- notebook helpers ----------------------------------------------------------------------


def test_skip_unattempted_names_the_stub_and_goes_on_but_lets_other_errors_through(capsys):
    def samples_needed(p, z):
        raise NotImplementedError()

    ran = []
    with skip_unattempted():
        ran.append(samples_needed(0.5, 5))
        ran.append("after the stub")
    assert ran == []  # the rest of the block is skipped, and nothing is raised
    assert capsys.readouterr().out == (
        "TO DO samples_needed: not attempted yet (NotImplementedError); "
        "the rest of this cell is skipped\n"
    )
    with skip_unattempted():
        ran.append("no stub")
    assert ran == ["no stub"] and capsys.readouterr().out == ""  # silent when it runs
    with pytest.raises(AssertionError, match="wrong"), skip_unattempted():
        raise AssertionError("a wrong attempt still stops the cell")


def test_glue_values_are_plain_python_numbers_so_format_specs_work():
    assert type(_plain(np.float64(2.5))) is float
    assert type(_plain(np.int64(3))) is int
    assert type(_plain(torch.tensor(1.5))) is float
    assert type(_plain(np.bool_(True))) is bool
    assert _plain("text") == "text"


def test_glued_floats_keep_only_the_digits_that_repeat_across_cpus(monkeypatch):
    stored = {}
    fake = type(sys)("myst_nb")
    fake.glue = lambda name, value, display=False: stored.__setitem__(name, value)
    monkeypatch.setitem(sys.modules, "myst_nb", fake)
    glue("noisy", 8.327820914337611)
    glue("counts", 2 / 3, digits=6)
    glue("whole", 25_255_296)
    assert stored == {"noisy": 8.328, "counts": 0.666667, "whole": 25_255_296}
    assert GLUE_DIGITS == 4
    assert rounded(0.6000000000000001) == 0.6 and rounded(0.0) == 0.0
    assert rounded(-1.23456e-5, 2) == -1.2e-5
    for bad in (0, 18, 2.0, True):
        with pytest.raises(ValueError, match="digits must be an integer in \\[1, 17\\]"):
            rounded(1.0, bad)


def test_a_rounding_error_is_shown_as_the_power_of_ten_it_stays_under():
    assert power_of_ten_above(1.1e-19) == 1e-14  # the floor
    assert power_of_ten_above(1.5e-5) == power_of_ten_above(1.3e-5) == 1e-4
    assert power_of_ten_above(0.0, floor=1e-12) == 1e-12
    assert power_of_ten_above(1e-3) == 1e-3
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="x must be a finite number >= 0"):
            power_of_ten_above(bad)
    with pytest.raises(ValueError, match="floor must be"):
        power_of_ten_above(1.0, floor=0.0)


def test_glue_works_without_myst_nb(monkeypatch):
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # import fails, as in Colab
    assert glue("x", 1.0) is None


def test_show_source_shows_the_librarys_own_code_with_a_relative_path():
    listing = show_source(speculative_generate)
    markdown = listing._repr_markdown_()
    assert "def speculative_generate(" in markdown
    assert "`specdec_lib/engine/generate.py`" in markdown
    assert "/work/" not in markdown and "site-packages" not in markdown
    assert markdown.count("```python") == 1
    lines = listing.source.splitlines()
    assert listing.last_line - listing.first_line + 1 == len(lines)


def test_show_source_fences_code_that_itself_contains_backticks():
    def example():
        return "```"

    assert "````python" in show_source(example)._repr_markdown_()


# --- round-by-round display ----------------------------------------------------------------


def test_rounds_show_accepted_rejected_correction_and_bonus_tokens():
    tok = Tokenizer()
    a, b, c = (" " + w for w in LEXICON["noun"][:3])  # one token each
    log = [rec(tok, f" the{a}", 2, f" the{a}{b}"), rec(tok, f"{c} of", 1, f"{c}\n")]
    view = render_rounds(log, tok)
    first, second = view.rounds
    assert (first.accepted, first.rejected, first.kind) == (tok.encode(f" the{a}"), [], "bonus")
    assert (second.rejected, second.target_token, second.kind) == (
        tok.encode(" of"),
        tok.encode("\n"),
        "correction",
    )
    html = view._repr_html_()
    assert "line-through" in html and "Key:" in html
    assert "background:#ffffff" in html  # opaque card: readable on light and dark themes
    text = repr(view)
    assert f"[ the{a}]<+{b}>" in text and f"[{c}]~ of~<↵>" in text
    assert view.n_emitted == 5


def test_a_round_cut_short_by_max_tokens_has_no_target_token():
    tok = Tokenizer()
    (only,) = render_rounds([rec(tok, "abcd", 2, "ab")], tok).rounds
    assert only.target_token == [] and only.rejected == tok.encode("cd")


def test_a_round_with_nothing_drafted_shows_the_targets_own_token():
    tok = Tokenizer()
    (only,) = render_rounds([rec(tok, "", 0, "x")], tok).rounds
    assert (only.kind, only.target_token, only.accepted) == ("plain", tok.encode("x"), [])
    assert "<=x>" in repr(render_rounds([rec(tok, "", 0, "x")], tok))


def test_rounds_display_escapes_html_in_tokens():
    tok = Tokenizer()
    html = render_rounds([rec(tok, "<b>", 3, "<b>&")], tok)._repr_html_()
    assert "<b>&amp;" not in html and "&lt;b&gt;" in html


def test_rounds_display_rejects_a_log_that_contradicts_itself():
    tok = Tokenizer()
    with pytest.raises(ValueError, match="n_accepted"):
        render_rounds([rec(tok, "ab", 3, "abc")], tok)
    with pytest.raises(ValueError, match="accepted drafts"):
        render_rounds([rec(tok, "ab", 2, "xyz")], tok)
    with pytest.raises(ValueError, match="max_rounds"):
        render_rounds([], tok, max_rounds=0)


def test_a_linked_stack_shows_the_child_its_control_points_at():
    import ipywidgets as widgets

    from specdec_lib.course.widgets import linked_stack

    slider = widgets.SelectionSlider(options=["a", "b", "c"], value="b")
    stack = linked_stack(slider, [widgets.HTML(f"state {i}") for i in range(3)])
    assert shown(stack)[0].value == "state 1"
    pick(slider, 2)
    assert shown(stack)[0].value == "state 2"
    with pytest.raises(ValueError, match="index"):
        pick(slider, -1)


def test_a_widget_picture_is_a_small_palette_png_in_the_course_ink():
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    from specdec_lib.course.plotting import INK, use_course_style
    from specdec_lib.course.widgets import widget_png

    use_course_style()
    assert plt.rcParams["axes.labelcolor"] == INK
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    png = widget_png(fig)
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.mode == "P" and len(image.getcolors()) <= 32
    assert not plt.fignum_exists(fig.number)  # closed: dozens of states, no leak


def test_a_log_axis_is_labelled_between_its_powers_of_ten(course_style):
    from specdec_lib.course.plotting import log_axis

    fig, ax = new_figure("positions", "time (ms)")
    ax.plot([1, 64], [2.0, 9.0])
    log_axis(ax, "y")
    fig.canvas.draw()
    low, high = ax.get_ylim()
    shown = [
        label.get_text()
        for value, label in zip(ax.get_yticks(), ax.get_yticklabels(), strict=True)
        if low <= value <= high
    ]
    assert ax.get_yscale() == "log"
    assert shown == ["2", "5"], shown  # the default axis labels nothing between 1 and 10
    with pytest.raises(ValueError, match="axis"):
        log_axis(ax, "z")
    plt.close(fig)


def test_round_bars_stack_what_each_pass_emitted_and_hatch_the_rejections(course_style):
    from specdec_lib.course.rounds_plot import plot_rounds

    def rnd(proposed, n_accepted, emitted):
        return SimpleNamespace(proposed=proposed, n_accepted=n_accepted, emitted=emitted)

    full = SimpleNamespace(log=[rnd([1, 2], 2, [1, 2, 3]), rnd([4, 5], 2, [4, 5, 6])])
    rejected = SimpleNamespace(log=[rnd([7, 8], 0, [9]), rnd([], 0, [3])])
    fig = plot_rounds({"all accepted": full, "one rejection": rejected}, k=2)
    left, right = fig.axes
    assert left.get_ylabel() and right.get_xlabel()  # the panels share the y-axis
    # accepted, target's own, hatched rejections (right panel only)
    assert [p.get_height() for p in left.patches] == [2, 2, 1, 1]
    assert [p.get_height() for p in right.patches] == [0, 0, 1, 1, 2]
    assert [t.get_text() for t in fig.legends[0].get_texts()].count(
        "rejected proposals (not emitted)"
    ) == 1
    # every swatch is styled as what it labels, whichever panel has rejections first
    swatch = dict(
        zip(
            [t.get_text() for t in fig.legends[0].get_texts()],
            fig.legends[0].legend_handles,
            strict=True,
        )
    )
    hatched = swatch["rejected proposals (not emitted)"]
    assert hatched.get_hatch() == "///" and hatched.get_facecolor()[3] == 0
    rejection = right.patches[-1]
    assert hatched.get_edgecolor() == rejection.get_edgecolor()
    for label, bar in [("accepted proposals", 0), ("target's own token", 2)]:
        assert swatch[label].get_facecolor() == left.patches[bar].get_facecolor(), label
        assert not swatch[label].get_hatch(), label
    plt.close(fig)
    with pytest.raises(ValueError, match="k must"):
        plot_rounds({"a": full}, k=0)
    with pytest.raises(ValueError, match="runs"):
        plot_rounds({}, k=2)
