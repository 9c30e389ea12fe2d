import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from specdec_lib.course.cost_view import cost_widget, plot_costs, row_cost, verdict  # noqa: E402
from specdec_lib.course.plotting import check_figure, new_figure  # noqa: E402


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


def test_verdict_names_the_cheaper_drafter_per_workload():
    lines = verdict(_rows(), c=0.0, o=0.0, k=1)
    assert "n-gram cheaper" in lines[0] and "draft model cheaper" in lines[1]


def test_the_widget_redraws_when_a_slider_moves():
    box = cost_widget(_rows(), c=0.0, o=0.0, k=1)
    sliders, text, image = box.children
    before = (bytes(image.value), text.value)
    assert before[0].startswith(b"\x89PNG")
    sliders.children[0].value = 1.0  # c: the draft model gets expensive
    assert (bytes(image.value), text.value) != before
    assert "n-gram cheaper" in text.value.split("<br>")[1]
