"""The n-gram match highlighter and the forward-pass cost measurements."""

from __future__ import annotations

import pytest

from specdec_lib import NgramDrafter, Tokenizer
from specdec_lib.analysis.costs import fit_pass_cost, weight_bytes
from specdec_lib.analysis.timing import Timing, time_passes
from specdec_lib.course.ngram_view import highlight_match, ngram_explorer

from helpers import pick, shown

# --- ngram_view ----------------------------------------------------------------------------


def test_highlight_marks_the_suffix_its_latest_earlier_match_and_what_followed():
    # Byte fallback spells " cat" and " dog" as four byte tokens each; "the" and " the" are
    # different word tokens. So the suffix " the", " ", "c" never occurred before, but
    # " ", "c" did, at position 1 (just after the opening "the").
    view = highlight_match("the cat sat. the dog sat. the c", k=3, max_n=8, min_n=2)
    tok = Tokenizer()
    assert view.match == (1, 2)
    assert tok.decode(view.proposal) == "at "
    spans = {
        role: tok.decode([t for t, r in zip(view.context, view.roles(), strict=True) if r == role])
        for role in ("suffix", "match", "proposal")
    }
    assert spans == {"suffix": " c", "match": " c", "proposal": "at "}


def test_highlight_agrees_with_the_drafter_on_every_cut_of_a_text():
    ids = Tokenizer().encode("abcab abcabc xyz abcabcab abc")
    for cut in range(1, len(ids) + 1):
        for k in (0, 1, 4):
            view = highlight_match(ids[:cut], k=k, max_n=4, min_n=2)
            assert view.proposal == NgramDrafter(max_n=4, min_n=2).propose(ids[:cut], k).tokens


def test_no_match_means_no_proposal_and_no_highlight():
    view = highlight_match("abcdefgh", k=4)
    assert view.match is None and view.proposal == []
    assert set(view.roles()) == {None}
    assert "nothing is proposed" in view.summary()
    assert "nothing is proposed" in view._repr_html_()
    assert "Key:" in view._repr_html_() and "Key:" not in view.html(key=False)


def test_overlapping_spans_give_the_suffix_priority():
    view = highlight_match("abababab", k=4, max_n=3, min_n=3)
    roles = view.roles()
    assert roles[-3:] == ["suffix"] * 3
    assert view.proposal  # periodic text always has something to copy


def test_html_escapes_the_text_and_the_text_form_brackets_each_span():
    view = highlight_match("<b> & <b> & <", k=2, max_n=4, min_n=3)
    page = view._repr_html_()
    assert "<b> &" not in page and "&lt;b&gt;" in page
    text = repr(view)
    assert "[" in text and "{" in text and "<" in text


def test_the_explorer_stores_every_cut_and_its_controls_pick_one_in_the_browser():
    widgets = pytest.importorskip("ipywidgets")
    texts = {"a": "xyz abc xyz abc xyz", "b": "no dup"}
    panel = ngram_explorer(texts, k=2, rewind=3)
    choose = panel.children[0]
    seen = [w for w in shown(panel) if isinstance(w, widgets.SelectionSlider)][0]
    ids = Tokenizer().encode(texts["a"])
    assert seen.options == tuple(str(n) for n in range(len(ids) - 3, len(ids) + 1))
    assert seen.index == 3  # starts at the whole text
    for index, cut in enumerate(seen.options):
        pick(seen, index)
        cards = [w.value for w in shown(panel) if isinstance(w, widgets.HTML)]
        assert cards[0] == highlight_match(ids[: int(cut)], k=2).html(key=False)
        assert "Key:" in cards[1]
    pick(choose, 1)
    assert "nothing is proposed" in shown(panel)[2].value
    with pytest.raises(ValueError, match="rewind"):
        ngram_explorer(texts, rewind=-1)
    with pytest.raises(ValueError, match="max_n"):
        ngram_explorer(texts, max_n=1, min_n=2)


# --- timing passes, and the pass-cost fit -------------------------------------------------


def test_parameter_bytes_counts_the_tied_embedding_once(untrained_target):
    assert weight_bytes(untrained_target) == 4 * untrained_target.num_parameters()


def test_time_passes_reports_a_median_within_its_range_for_each_size(untrained_target):
    timings = time_passes(untrained_target, [1, 4], context_len=16, repeats=3, warmup=1)
    assert set(timings) == {1, 4}
    for t in timings.values():
        assert 0 < t.fastest <= t.median <= t.slowest and t.repeats == 3


def test_time_passes_rejects_a_pass_that_overflows_the_context_window(untrained_target):
    with pytest.raises(ValueError, match="block_size"):
        time_passes(untrained_target, [64], context_len=untrained_target.config.block_size)
    with pytest.raises(ValueError, match="positions"):
        time_passes(untrained_target, [0])


def test_the_pass_cost_fit_recovers_a_line_and_ignores_one_spoiled_point():
    line = {t: 1.0 + 0.1 * t for t in (1, 2, 4, 8, 16, 32, 64)}
    line[4] = 9.0  # a burst of load from another process
    fit = fit_pass_cost({t: Timing(y, y, y, 1) for t, y in line.items()})
    assert abs(fit.fixed - 1.0) < 1e-9 and abs(fit.per_position - 0.1) < 1e-9
    assert abs(fit.ratio(5) - 1.5 / 1.1) < 1e-9


def test_the_pass_cost_fit_needs_two_points():
    with pytest.raises(ValueError, match="at least 2"):
        fit_pass_cost({1: Timing(1.0, 1.0, 1.0, 1)})
