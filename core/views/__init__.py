"""What a page or a command shows when it needs several domains at once: the ZeRO page's view (memory, its
communication, activations with simulated in-flight counts) and the lecture's answers, computed live.

May import: params, model, pipeline, memory, cost and the top-level basics (not planner, not cli).
Importing it registers the schedules (core.pipeline.schedules), whose names the pages' inputs read.
"""

import core.pipeline.schedules  # noqa: F401
