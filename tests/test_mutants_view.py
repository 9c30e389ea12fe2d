import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from specdec_lib.course.mutants_view import plot_catch_matrix  # noqa: E402

from helpers import check_figure  # noqa: E402

TESTS = {"a": "test a", "b": "test b"}


def _row(name, a=(0.0, 0.0, 0.3), b=(1.0, 0.9, 1.0)):
    tests = {k: {"rate": r, "interval": [lo, hi]} for k, (r, lo, hi) in (("a", a), ("b", b))}
    return {"mutant": name, "tests": tests}


def test_draws_one_labelled_row_per_engine_and_one_column_per_test():
    fig, ax = plot_catch_matrix([_row("correct engine"), _row("bug")], TESTS, split_after=1)
    check_figure(fig)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["bug", "correct engine"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["test\na", "test\nb"]


def test_shades_exactly_the_cells_whose_interval_lies_above_caught_above():
    fig, ax = plot_catch_matrix([_row("x"), _row("y", a=(0.8, 0.6, 0.9))], TESTS)
    # column b in both rows, column a in row y only
    assert len(ax.patches) == 3
    fig, ax = plot_catch_matrix([_row("x"), _row("y", a=(0.8, 0.6, 0.9))], TESTS, caught_above=0.7)
    assert len(ax.patches) == 2


def test_accepts_an_upper_bound_a_rounding_error_below_the_rate():
    plot_catch_matrix([_row("x", b=(1.0, 0.98, 0.9999999999999999))], TESTS)


@pytest.mark.parametrize(
    ("rows", "tests", "kwargs", "parameter"),
    [
        ([], TESTS, {}, "rows"),
        ([_row("x")], {}, {}, "tests"),
        ([_row("x")], TESTS, {"caught_above": 1.0}, "caught_above"),
        ([_row("x")], TESTS, {"split_after": 2}, "split_after"),
        ([_row("x")], TESTS, {"split_after": True}, "split_after"),
        ([_row("x", a=(0.5, 0.6, 0.9))], TESTS, {}, "rows"),
        ([{"mutant": "x", "tests": {}}], TESTS, {}, "rows"),
        ([{"tests": _row("x")["tests"]}], TESTS, {}, "rows"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_parameter(rows, tests, kwargs, parameter):
    with pytest.raises(ValueError, match=parameter):
        plot_catch_matrix(rows, tests, **kwargs)
