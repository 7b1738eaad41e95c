"""The Pipeline page's upload of a PyTorch action table, through AppTest: it is timed with the sidebar's costs
and shows the same numbers as `simulate --from-csv`; a bad table is an error message, never an exception."""

from core.pipeline.result import PipelineParams, simulate
from core.pipeline.trace_export import pytorch_actions_csv
from tests.test_page_pipeline import run


def test_an_uploaded_table_is_timed_with_the_sidebar_costs():
    at = run({"schedule": "1f1b", "tb": "2"})
    table = pytorch_actions_csv(simulate(PipelineParams(schedule="zbv", p=4, m=8)).schedule)
    at.file_uploader(key="actions_csv").upload("zbv.csv", table.encode(), "text/csv").run()
    assert not at.exception and not at.error
    ours = simulate(PipelineParams(schedule="zbv", p=4, m=8, tf=1.0, tb=2.0, tw=0.0)).timeline
    shown = [m.value for m in at.metric]
    assert f"{ours.makespan:,.4g}" in shown and f"{100 * ours.bubble_fraction:.2f} %" in shown
    assert any("zbv.csv: p = 4 ranks, m = 8 micro-batches, 2 stage(s) per rank." in c.value for c in at.caption)
    assert at.get("plotly_chart")[-1].proto.spec


def test_a_bad_table_is_an_error_message():
    at = run()
    at.file_uploader(key="actions_csv").upload("bad.csv", b"0F0,0Z9\n", "text/csv").run()
    assert not at.exception
    assert any("This table cannot be timed: action table, row 1 (rank 0), column 2: '0Z9' is not an action" in e.value
               for e in at.error)
