"""Each page's view model: everything a page shows for one parameter set, as plain data (numbers, tables, the
data of each figure). Pages and ui/ reach core only through these modules (and core.params, core.errors,
core.units): the ZeRO page's view (memory, its communication, activations with simulated in-flight counts), the
Planner's (PlanView, downloads from its plan, the links to the other pages), the Pipeline page's seam into the
pipeline domain, the Planner's check of a pasted config, and the lecture's answers, computed live.

May import: params, model, pipeline, memory, cost, planner, configs and the top-level basics (not cli).
"""

import core.pipeline.schedules  # noqa: F401  registers the schedules, whose names the pages' inputs read
