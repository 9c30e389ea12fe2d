import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from specdec_lib.analysis.costs import best_k, row_cost  # noqa: E402
from specdec_lib.course.cost_view import cost_widget, plot_costs, verdict  # noqa: E402
from specdec_lib.course.plotting import new_figure  # noqa: E402

from helpers import check_figure, pick, shown  # noqa: E402


def _rows():
    rows = []
    for workload, ngram_tpp, draft_tpp in (("copy", 4.0, 2.0), ("novel", 1.0, 2.0)):
        for k in (1, 2):
            rows.append(
                dict(
                    workload=workload,
                    drafter="ngram",
                    k=k,
                    emitted=100,
                    target_passes=int(100 / ngram_tpp),
                    draft_passes=0,
                )
            )
            rows.append(
                dict(
                    workload=workload,
                    drafter="draft",
                    k=k,
                    emitted=100,
                    target_passes=int(100 / draft_tpp),
                    draft_passes=50 * k,
                )
            )
    return rows


def test_an_ngram_row_pays_o_per_round_and_a_draft_row_c_per_draft_pass():
    ngram = dict(drafter="ngram", emitted=100, target_passes=25, draft_passes=0)
    draft = dict(drafter="draft", emitted=100, target_passes=50, draft_passes=100)
    assert row_cost(ngram, c=0.9, o=0.2) == pytest.approx((25 + 0.2 * 25) / 100)
    assert row_cost(draft, c=0.3, o=0.9) == pytest.approx((50 + 0.3 * 100) / 100)


def test_plot_costs_draws_every_drafter_and_workload_and_plain_decoding():
    fig, ax = new_figure("k", "cost")
    plot_costs(ax, _rows(), c=0.2, o=0.01, k_mark=2)
    labels = [line.get_label() for line in ax.get_lines()]
    assert sum('"' in label for label in labels) == 4 and "plain decoding" in labels
    check_figure(fig)


def test_verdict_takes_each_drafter_at_its_best_k_and_names_the_cheaper():
    lines = verdict(_rows(), c=0.0, o=0.0)
    assert "n-gram cheaper" in lines[0] and "draft model cheaper" in lines[1]
    # Both k give 2 tokens per target pass, so a dear draft pass makes the shorter draft best.
    assert best_k(_rows(), "novel", "draft", c=1.0, o=0.0) == 1
    with pytest.raises(ValueError, match="rows"):
        best_k(_rows(), "novel", "eagle", c=0.0, o=0.0)


def test_the_widget_stores_every_price_and_its_controls_pick_one_in_the_browser():
    box = cost_widget(_rows(), c=0.0, o=0.0, c_values=(0.0, 1.0), o_values=(0.0, 0.5))
    c_pick, o_pick = box.children[:2]
    text, image = shown(box)[-2:]
    before = (bytes(image.value), text.value)
    assert before[0].startswith(b"\x89PNG") and "draft model cheaper" in text.value.split("<br>")[1]
    pick(c_pick, 1)  # c = 1: the draft model gets expensive
    text, image = shown(box)[-2:]
    assert (bytes(image.value), text.value) != before
    assert text.value == "<br>".join(verdict(_rows(), c=1.0, o=0.0))
    pick(o_pick, 1)
    assert shown(box)[-2].value == "<br>".join(verdict(_rows(), c=1.0, o=0.5))


def test_the_widget_refuses_a_start_it_does_not_offer():
    with pytest.raises(ValueError, match="c_values"):
        cost_widget(_rows(), c=0.25, c_values=(0.0, 0.5))
    with pytest.raises(ValueError, match="o_values"):
        cost_widget(_rows(), o=0.0, o_values=(-1.0, 0.0))
