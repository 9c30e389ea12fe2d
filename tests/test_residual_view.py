import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from specdec_lib.course.plotting import check_figure, use_course_style  # noqa: E402
from specdec_lib.course.residual_view import PRESETS, plot_residual_rule, residual_rule_widget  # noqa: E402


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_draws_a_labelled_opaque_figure(name):
    use_course_style()
    check_figure(plot_residual_rule(*PRESETS[name]))


def test_the_figure_refuses_weights_that_are_not_a_distribution():
    with pytest.raises(ValueError, match="non-negative weights"):
        plot_residual_rule([1, -1, 2], [1, 1, 1])
    with pytest.raises(ValueError, match="same length"):
        plot_residual_rule([1, 1, 2], [1, 1])


def test_the_widget_loads_a_preset_into_its_sliders_and_redraws():
    widget = residual_rule_widget()
    menu, rows, _, image = widget.children
    first_png = bytes(image.value)
    assert first_png.startswith(b"\x89PNG")
    menu.value = "one-hot draft (n-gram)"
    q_sliders = rows.children[1].children[1:]
    assert [s.value for s in q_sliders] == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert bytes(image.value) != first_png
