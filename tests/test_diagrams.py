import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from specdec_lib.course.diagrams import (  # noqa: E402
    cache_crop_diagram,
    causal_mask_diagram,
    verification_pass_diagram,
)
from specdec_lib.course.plotting import COLORS  # noqa: E402

DRAFTS = [" the", " mimuma", " pazan", "."]


def _texts(fig: Figure) -> str:
    return "\n".join(t.get_text() for t in fig.axes[0].texts)


def _edges(fig: Figure) -> set[str]:
    return {matplotlib.colors.to_hex(p.get_edgecolor()) for p in fig.axes[0].patches}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("n_accepted", range(5))
def test_a_verification_pass_has_k_plus_1_rows_and_marks_every_outcome(n_accepted):
    fig = verification_pass_diagram([" over", *DRAFTS], n_accepted, ["a", "b", "c", "d", "e"])
    assert isinstance(fig, Figure)
    text = _texts(fig)
    assert all(f"row {i}" in text for i in range(5)) and "row 5" not in text
    assert text.count("✓") == n_accepted
    assert ("bonus\ntoken" in text) == (n_accepted == 4)
    assert ("bonus row:\nunused" in text) == (n_accepted < 4)
    assert ("rejected" in text) == (n_accepted < 4)
    edges = _edges(fig)
    assert (COLORS["accepted"].lower() in edges) == (n_accepted > 0)
    assert (COLORS["rejected"].lower() in edges) == (n_accepted < 4)


def test_a_verification_pass_says_row_i_scores_draft_i_plus_1():
    text = _texts(verification_pass_diagram(["a", "b", "c"], 0))
    assert "✗ draft 1" in text and "draft 2:\nunused" in text


def test_the_causal_mask_masks_exactly_the_later_positions_of_each_new_row():
    tokens = ["w", "x", " the", " mimuma", " pazan"]
    fig = causal_mask_diagram(tokens, n_cached=2, first_position=80)
    masked = [t for t in fig.axes[0].texts if t.get_text() == "×"]
    assert len(masked) == 1 + 2  # rows of 3 new positions see 3, 4 and 5 of 5 keys
    text = _texts(fig)
    assert "80" in text and "84" in text and "pending: the" in text


def test_the_cache_crop_shows_the_length_moving_and_the_stale_entries():
    fig = cache_crop_diagram([" a", " b"], " c", [" x", " y", " z"], 1, " w", first_position=10)
    text = _texts(fig)
    for length in (12, 16, 14):  # before, after the pass, after crop(14)
        assert f"length {length}" in text
    assert "crop(14)" in text and "stale" in text and "correction" in text
    hatched = [p for p in fig.axes[0].patches if p.get_hatch()]
    assert len(hatched) == 2  # two rejected drafts, now stale


def test_a_round_that_accepts_everything_crops_nothing_and_ends_with_a_bonus():
    text = _texts(cache_crop_diagram(["a"], "b", ["c", "d"], 2, "e"))
    assert "stale" not in text and "bonus" in text and text.count("length 4") == 2


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: verification_pass_diagram(["a"], 0), "tokens"),
        (lambda: verification_pass_diagram("abc", 0), "tokens"),
        (lambda: verification_pass_diagram(["a", "b"], 2), "n_accepted"),
        (lambda: verification_pass_diagram(["a", "b"], -1), "n_accepted"),
        (lambda: verification_pass_diagram(["a", "b"], 1, ["x"]), "target_tokens"),
        (lambda: causal_mask_diagram(["a", "b"], 2), "n_cached"),
        (lambda: causal_mask_diagram(["a", "b"], 1, first_position=-1), "first_position"),
        (lambda: causal_mask_diagram([1, 2], 1), "tokens"),
        (lambda: cache_crop_diagram([], "p", ["d"], 0, "c"), "context"),
        (lambda: cache_crop_diagram(["a"], "p", ["d"], 2, "c"), "n_accepted"),
        (lambda: cache_crop_diagram(["a"], 3, ["d"], 0, "c"), "pending"),
        (lambda: cache_crop_diagram(["a"] * 10, "p", ["d"] * 10, 0, "c"), "context and drafts"),
    ],
)
def test_bad_arguments_raise_a_value_error_naming_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_tree_diagram_draws_the_engines_layout_and_checks_its_labels():
    import matplotlib.pyplot as plt

    from specdec_lib.course.tree_view import tree_diagram
    from specdec_lib.engine.tree import TokenTree

    tree = TokenTree([5, 6, 7], [-1, -1, 0])
    fig = tree_diagram(tree, ["a", "b", "c"], "p", 10, accepted=[0, 2])
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"10", "11", "12"} <= texts  # pending at 10, both children at 11, a grandchild at 12
    plt.close(fig)
    with pytest.raises(ValueError, match="labels"):
        tree_diagram(tree, ["a"], "p", 10)
