"""Home: what the tool answers, a card per page, and the command line."""

import streamlit as st

from ui.shared.layout import APP_NAME, APP_TAGLINE
from ui.shared.links import PAGES, available_pages, copy_link_box, link_to_page
from ui.shared.page_state import enter_page

st.title(APP_NAME)
enter_page("home", {})  # the home page has no inputs; a page opened from here brings back its own
copy_link_box({}, {}, "")
st.markdown(APP_TAGLINE)

st.subheader("What it answers")
st.markdown(
    """
- **Pipeline**: for a schedule (GPipe, 1F1B, interleaved, zero-bubble, DualPipeV, ...), which device
  runs which micro-batch when, how large the bubble is, and how many activations each stage holds.
- **ZeRO memory**: how many bytes of parameters, gradients and optimizer state one GPU holds under
  plain data parallelism, ZeRO 1, 2, 3 and FSDP, and what offloading changes.
- **Planner**: which tensor x pipeline x data layouts fit a model on a cluster, and which is fastest.
- **Lecture**: the same ideas in order, for a class, with the figures live.

Every number comes from the same engine as the command line; every view has a link that reopens it
with the same settings.
"""
)

st.subheader("Pages")
ready = {p.file for p in available_pages()}
columns = st.columns(2)
for i, page in enumerate(p for p in PAGES if p.url_path):
    with columns[i % 2].container(border=True):
        if page.file in ready:
            link_to_page(page)
        else:
            st.markdown(f"{page.icon} **{page.title}** (coming soon)")
        st.caption(page.description)

st.subheader("Command line")
st.markdown("The same engine without a browser; `--help` lists the subcommands and their inputs:")
st.code("python -m core --help", language="bash")
