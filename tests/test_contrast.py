"""WCAG AA (4.5:1 for text), computed from the colours the stepper's buttons and the timeline's
labels actually use, a disabled button as JupyterLab draws it (at its opacity over the page)."""

from __future__ import annotations

from functools import partial
from typing import Any

import matplotlib.colors
import numpy as np
import pytest

from helpers import Lab, Stepper
from helpers.instruments.history import Op
from helpers.instruments.plots import PALETTE, contrast, plot_timeline
from helpers.instruments.stepper import DISABLED_OPACITY

AA = 4.5
PAGE = "#FFFFFF"


def over_page(colour: str, opacity: float) -> str:
    """Return colour as seen drawn at opacity over the page."""
    rgb, page = (np.array(matplotlib.colors.to_rgb(c)) for c in (colour, PAGE))
    return matplotlib.colors.to_hex(opacity * rgb + (1 - opacity) * page)


def button_contrast(button: Any) -> float:
    """Return the contrast of a button's text on its background, as drawn."""
    background, text = button.style.button_color, button.style.text_color
    assert background and text, f"{button.description!r} takes its colours from the theme"
    if button.disabled:
        background = over_page(background, DISABLED_OPACITY)
        text = over_page(text, DISABLED_OPACITY)
    return contrast(text, background)


def allow(client: Any, key: str) -> bool:
    count = int(client.get(key) or 0)
    if count >= 1:
        return False
    client.incrby(key, 1)
    return True


def every_button(stepper: Stepper) -> list[Any]:
    view = stepper._view
    assert view is not None
    return [*view.buttons.values(), view.reset_button, view.explore_button]


def test_stepper_buttons_meet_aa_ready_done_and_closed(lab: Lab) -> None:
    key = lab.key("contrast")
    actor = partial(allow, key=key)
    stepper = Stepper(lab, {"A": actor, "B": actor}, setup=lambda c: c.delete(key), watch=[key])
    stepper.widget()
    buttons = stepper._view.buttons
    seen: dict[str, float] = {}
    for step in ["", "A", "A", "B", "B"]:  # at the start, mid-way, A finished, both finished
        if step:
            buttons[step].click()
        for button in every_button(stepper):
            ratio = button_contrast(button)
            seen[f"{button.description} (disabled={button.disabled})"] = ratio
            assert ratio >= AA, (button.description, button.disabled, round(ratio, 2))
    assert any(b.disabled for b in buttons.values()), "no finished actor was checked"
    stepper.close()
    for button in every_button(stepper):
        assert button_contrast(button) >= AA, (button.description, "closed")
    assert len(seen) >= 4


def test_the_themes_info_button_the_stepper_used_fails_aa() -> None:
    teal = "#0097A7"  # JupyterLab's --jp-info-color1, under the white text of button_style="info"
    assert contrast("white", teal) < AA
    assert contrast(over_page("white", DISABLED_OPACITY), over_page(teal, DISABLED_OPACITY)) < AA


@pytest.mark.parametrize("unit", ["step", "ms"])
def test_timeline_labels_meet_aa_on_their_bars(unit: str) -> None:
    lanes = len(PALETTE)  # every palette colour gets a lane, so every pairing is drawn
    history = [Op(c, "INCRBY", 10 * c, 10 * c + 8, 1) for c in range(lanes)]
    fig = plot_timeline(history, unit=unit, label_ops=True)
    ax = fig.axes[0]
    bars = ax.collections[-lanes:]  # one collection of op bars per lane, in lane order
    labels = [t for t in ax.texts if t.get_text() == "INCRBY"]
    assert len(labels) == lanes
    for text in labels:
        lane = round(text.get_position()[1])
        background = matplotlib.colors.to_hex(bars[lane].get_facecolor()[0])
        assert background == PALETTE[lane].lower()
        ratio = contrast(matplotlib.colors.to_hex(text.get_color()), background)
        assert ratio >= AA, (background, text.get_color(), round(ratio, 2))
