"""The Pipeline page's upload: time a PyTorch action table (the order a job really runs) with the sidebar's costs,
and show its Gantt, bubble and activation memory like a generated schedule's. The file is not in the link (a URL
cannot hold it); everything else about the numbers is core's (core.pipeline.trace_import)."""

from __future__ import annotations

import streamlit as st

from core.errors import InputError
from core.params.upload import LIMITS, UPLOAD_MB
from core.views.pipeline import Imported, PipelineParams
from core.views.pipeline import imported as timed_table
from ui.pipeline import figures as figs
from ui.shared.cache import cached


@cached(max_entries=8, max_size="100MB")
def imported(data: bytes, tf: float, tb: float, tw: float, tcomm: float) -> Imported:
    """Cached core.views.pipeline.imported (an upload is timed once per file and costs)."""
    return timed_table(data, tf, tb, tw, tcomm)


def action_table_section(params: PipelineParams, present: bool, veil: str) -> None:
    with st.expander("Inspect a PyTorch action table (upload its CSV)"):
        st.caption("One row of torch.distributed.pipelining actions per rank (0F1, 3B0, 2I5, 2W5, "
                   "(0F7;7B3)OVERLAP_F_B; sends, receives and FSDP actions are skipped), as its `_dump_csv` writes "
                   "them or this page's download. Timed with the sidebar's t_f, t_b, t_w and t_comm; the file is "
                   f"not part of the page's link. A table holds {LIMITS.describe()}. "
                   "Same numbers: `python -m core simulate --from-csv FILE --json`.")
        # The server refuses a larger file (server.maxUploadSize, the same number); this shows the limit.
        upload = st.file_uploader("PyTorch action table (CSV)", type=["csv", "txt"], key="actions_csv",
                                  max_upload_size=UPLOAD_MB)
        if upload is None:
            return
        try:  # core checks the size, the encoding and every index before it allocates anything
            got = imported(upload.getvalue(), params.tf, params.tb, params.tw, params.tcomm)
        except InputError as exc:
            st.error(f"This table cannot be timed: {exc}", icon=":material/block:")
            return
        s = got.summary
        cols = st.columns(4)
        cols[0].metric("Makespan", f"{s['makespan']:,.4g}", help="With the sidebar's costs (time units).")
        cols[1].metric("Bubble: idle share", f"{100 * s['bubble_fraction']:.2f} %")
        cols[2].metric("Bubble: relative to ideal", f"{100 * s['bubble_vs_ideal']:.2f} %")
        cols[3].metric("Peak activation", f"{max(s['peak_activation']):,.4g}",
                       help="Micro-batches of one device's share of layers, most held by one device.")
        st.caption(f"{upload.name}: p = {got.p} ranks, m = {got.m} micro-batches, {got.v} stage(s) per rank.")
        st.plotly_chart(figs.gantt([(upload.name, got.timeline)], None, presentation=present, veil=veil),
                        key="upload_gantt")
        st.plotly_chart(figs.memory(got.timeline, None, presentation=present, veil=veil), key="upload_memory")
