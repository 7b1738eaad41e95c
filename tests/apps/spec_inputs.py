"""Test page: every input of one spec table through ui.shared.widgets, values echoed as plain text (AppTest).

The table is chosen by the unbound query parameter `table` ("module:NAME", default the Pipeline table),
so one page covers every table in core.params.
"""

import importlib
import json

import streamlit as st

from ui.shared.links import copy_link_box
from ui.shared.widgets import url_inputs

module, name = st.query_params.get("table", "core.params.pipeline:PIPELINE").split(":")
specs = getattr(importlib.import_module(module), name)

values = url_inputs(specs)
st.text("VALUES " + json.dumps(values, sort_keys=True))
copy_link_box(values, specs, "pipeline")
