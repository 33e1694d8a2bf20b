"""The keyboard focus ring stands out (WCAG 1.4.11: 3:1 or better) on every background it is drawn on."""

import re
from pathlib import Path

CSS = Path(__file__).resolve().parents[2] / "static" / "css" / "dashboard.css"

# Backgrounds a focused control sits on: page, cards, top bar, side navigation (current and hover),
# table headers and menus.
BACKGROUNDS = ["--bg", "--surface", "#15203a", "#dfe7fb", "#e8ecf3", "#fafbfc", "#eef2fb"]


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    low, high = sorted([_luminance(a), _luminance(b)])
    return (high + 0.05) / (low + 0.05)


def test_focus_ring_has_three_to_one_contrast_on_every_background() -> None:
    css = CSS.read_text()
    variables = dict(re.findall(r"(--[\w-]+):\s*(#[0-9a-fA-F]{6})\s*;", css))
    assert re.search(r":focus-visible\s*\{[^}]*outline:[^;]*var\(--focus\)", css)
    focus = variables["--focus"]
    for background in BACKGROUNDS:
        colour = variables.get(background, background)
        ratio = _contrast(focus, colour)
        assert ratio >= 3, f"focus ring {focus} on {colour}: {ratio:.2f}:1"
