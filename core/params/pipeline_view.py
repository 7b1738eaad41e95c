"""Inputs of the Pipeline page's view (not of the engine): time cursor, image format, compared schedules.

`cursor` is a share of the makespan, so a link keeps its meaning when the schedule or the costs
change. `compare` is a repeated URL key (?compare=zb-h1&compare=zbv, as Streamlit's multiselect
writes it): COMPARE describes one item, so it is not in the table (whose inputs are single values).
"""

from __future__ import annotations

from core.params import Spec, table
from core.params.pipeline import SCHEDULE_NAMES

VIEW = table(
    Spec("cursor", "float", 100.0, 0.0, 100.0, label="Time cursor", unit="% of the makespan",
         help="Shows the schedule up to this moment; later work is greyed out. 100 shows everything."),
    Spec("img", "choice", "png", choices=("png", "svg"), label="Chart image format",
         help="What the camera button above each chart saves: PNG (slides) or SVG (print, scalable)."),
    Spec("equal_mem", "bool", False, label="Compare at equal memory",
         help="Give each compared schedule the m (and v) at which it holds the same activation memory as this "
              "one, for the same global batch (its micro-batches are then larger or smaller), then compare."),
    Spec("frontier", "bool", False, label="Memory/bubble frontier",
         help="Every schedule at these p, m, v and costs, by peak activation memory against idle share."),
    Spec("per_device", "bool", False, label="Per device",
         help="The per-device table (busy, idle, peaks, weight versions) is open."),
    Spec("text_timeline", "bool", False, label="Text timeline (course notation)",
         help="The text timeline is open: one character per time unit, as in the course notes."),
)

MAX_COMPARED = 11  # schedules drawn under the page's own at once (every other one of the twelve): bounds one view

COMPARE = Spec("compare", "choice", "gpipe", choices=SCHEDULE_NAMES, max_items=MAX_COMPARED,
               label="Compare with",
               help="Other schedules drawn under this one on the same time axis, with the same p, m and costs.")
