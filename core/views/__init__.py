"""What a page or a command shows when it needs several domains at once: the ZeRO page's view (memory, its
communication, activations with simulated in-flight counts) and the lecture's answers, computed live.

May import: params, model, pipeline, memory, cost and the top-level basics (not planner, not cli).
"""

import core.pipeline.schedules  # noqa: F401  registers the schedules, whose names the pages' inputs read
