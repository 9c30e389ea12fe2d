import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from specdec_lib.course.plotting import use_course_style  # noqa: E402
from specdec_lib.course.residual_view import (  # noqa: E402
    PRESETS,
    TOWARD,
    plot_residual_rule,
    residual_rule_widget,
)

from helpers import check_figure, pick, shown  # noqa: E402


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_draws_a_labelled_opaque_figure(name):
    use_course_style()
    check_figure(plot_residual_rule(*PRESETS[name]))


def test_the_figure_refuses_weights_that_are_not_a_distribution():
    with pytest.raises(ValueError, match="non-negative weights"):
        plot_residual_rule([1, -1, 2], [1, 1, 1])
    with pytest.raises(ValueError, match="same length"):
        plot_residual_rule([1, 1, 2], [1, 1])


def test_the_widget_stores_every_preset_and_step_and_its_controls_pick_one_in_the_browser():
    widget = residual_rule_widget()
    menu, slider, _ = widget.children
    assert slider.options[0] == "0%" and slider.options[-1] == "100%" and len(TOWARD) == 5
    seen = {bytes(shown(widget)[2].value)}
    for index in range(1, len(TOWARD)):
        pick(slider, index)
        seen.add(bytes(shown(widget)[2].value))
    pick(menu, list(PRESETS).index("one-hot draft (n-gram)"))
    seen.add(bytes(shown(widget)[2].value))
    assert len(seen) == len(TOWARD) + 1 and all(png.startswith(b"\x89PNG") for png in seen)


def test_the_widget_refuses_steps_outside_zero_to_one_and_unequal_lengths():
    with pytest.raises(ValueError, match="toward"):
        residual_rule_widget(toward=(0.0, 1.5))
    with pytest.raises(ValueError, match="same length"):
        residual_rule_widget({"bad": ([1, 2], [1, 2, 3])})
