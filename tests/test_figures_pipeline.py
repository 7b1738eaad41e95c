"""The Gantt's colours: every shade the chart can draw stays apart for colour-blind viewers, and the binned view
never mixes two kinds into a colour the legend does not show (issue 11).

Colour-vision deficiency is simulated with Machado, Oliveira and Fernandes (2009), "A Physiologically-based Model
for Simulation of Color Vision Deficiency", IEEE TVCG 15(6), severity 1.0 matrices, applied to linear RGB.
"""

import base64
import itertools
import struct
import zlib

import numpy as np
import pytest

from core.pipeline.result import PipelineParams
from core.pipeline.view import pipeline_view
from ui.pipeline import figures as figs

DEUTERANOPIA = np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                         [-0.011820, 0.042940, 0.968881]])
PROTANOPIA = np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                       [-0.003882, -0.048116, 1.051998]])
IDLE_ON_WHITE = "#e6e6e6"  # rgba(128, 128, 128, 0.2) over a white page


def _linear(hex_color):
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _srgb(linear):
    linear = np.clip(linear, 0, 1)
    return 255 * np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)


@pytest.mark.parametrize("vision", [np.eye(3), DEUTERANOPIA, PROTANOPIA], ids=["typical", "deuteranopia", "protanopia"])
def test_every_shade_stays_apart_for_colour_blind_viewers(vision):
    shades = [c for pair in figs._SHADES for c in pair] + [IDLE_ON_WHITE]
    seen = {c: _srgb(vision @ _linear(c)) for c in shades}
    closest = min(np.linalg.norm(seen[a] - seen[b]) for a, b in itertools.combinations(shades, 2))
    assert closest >= 25  # the old palette had I (red) and W (green) 5 apart for deuteranopes


def test_the_legend_names_every_shade_of_an_interleaved_chart():
    view = pipeline_view(PipelineParams(schedule="interleaved", p=4, m=8))
    fig = figs.gantt([("", view.timeline)])
    legend = {t.name: t.marker.color for t in fig.data if t.showlegend is not False and t.type == "bar"}
    for k, label in ((0, "F"), (1, "B")):
        dark, light = figs._SHADES[k]
        assert set(np.atleast_1d(legend[f"{label}: {figs.KIND_TITLES[k]}"])) == {dark}
        assert set(np.atleast_1d(legend[f"{label} chunk 1: {figs.KIND_TITLES[k]}, lighter"])) == {light}


def test_the_binned_view_draws_one_stripe_per_kind_and_no_mixed_colour():
    view = pipeline_view(PipelineParams(schedule="1f1b", p=8, m=512))
    assert view.timeline.aggregated
    rgba, kinds = figs.heat_rgba(view.timeline.heat)
    assert kinds == [0, 1] and rgba.shape == (8 * 3, view.timeline.heat.share.shape[2], 4)
    drawn = {tuple(int(x) for x in px[:3]) for px in rgba.reshape(-1, 4) if px[3] > 0}
    assert drawn == {tuple(int(figs.COLORS[k][i:i + 2], 16) for i in (1, 3, 5)) for k in kinds}
    # a steady-state bin of 1F1B (t_b = 2 t_f) is a third forward and two thirds backward, not all backward
    forward, backward = rgba[0, 200:400, 3].mean(), rgba[1, 200:400, 3].mean()
    assert forward == pytest.approx(255 / 3, abs=3) and backward == pytest.approx(2 * 255 / 3, abs=3)


def test_png_uri_is_a_valid_png_of_the_image():
    rgba = np.zeros((3, 5, 4), dtype=np.uint8)
    rgba[1, 2] = (1, 2, 3, 4)
    png = base64.b64decode(figs.png_uri(rgba).split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (5, 3)
    idat = png.index(b"IDAT")
    raw = zlib.decompress(png[idat + 4: idat + 4 + struct.unpack(">I", png[idat - 4:idat])[0]])
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(3, 1 + 5 * 4)
    assert (rows[:, 0] == 0).all() and tuple(rows[1, 1 + 2 * 4: 1 + 3 * 4]) == (1, 2, 3, 4)


def test_the_gantt_has_no_time_cursor_of_its_own():
    # one time cursor (issue 23): the page's slider, steps and Play move it; a figure only draws the one it is given
    view = pipeline_view(PipelineParams(schedule="1f1b", p=4, m=8))
    spec = figs.gantt([("", view.timeline)], 16.5).to_dict()
    assert "frames" not in spec and not spec["layout"].get("updatemenus") and not spec["layout"].get("sliders")
    assert [s["x0"] for s in spec["layout"]["shapes"]] == [16.5, 16.5]
