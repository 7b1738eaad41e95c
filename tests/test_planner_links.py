"""Each planner row links to the Pipeline and ZeRO pages with its own values; a row with nothing simulated gets none."""

import math

from core.params.planner import PlannerParams
from core.planner.plan import plan
from ui.planner.cache import with_links


def test_rows_excluded_before_timing_get_no_pipeline_link_and_the_others_do():
    frame = plan(PlannerParams(gpus=7, batch=3)).frame.head(200)  # a prime G: p = 7 rows fail before any timing
    out = with_links(frame, {})
    untimed = [not math.isfinite(tf) for tf in out["tf"]]
    assert any(untimed) and any(m > 0 for m, u in zip(out["m"], untimed, strict=True) if u)  # the case that raised
    for link, tf, m in zip(out["pipeline_link"], out["tf"], out["m"], strict=True):
        assert isinstance(link, str) == (m > 0 and math.isfinite(tf))
        if isinstance(link, str):
            assert "pipeline" in link
    assert out["zero_link"].notna().sum() == (out["m"] > 0).sum()

