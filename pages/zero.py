"""ZeRO memory: bytes per GPU under plain data parallelism and ZeRO 1-3, what offload, activations and FSDP
wrapping change, and a live check that sharding Adam changes nothing.
Inputs -> core (core.views.zero, cached in ui.zero.cache) -> figures.

The body reads top to bottom: headline (numbers first) -> inputs -> the tabs' inputs -> the main view -> each tab.
"""


import streamlit as st

from core.errors import InputError
from core.params import zero_page as zp
from core.params.memory import ZERO
from core.views import zero as zv
from core.views.fallback import settled
from ui.shared.layout import first_paint, page_header
from ui.shared.links import copy_link_box
from ui.shared.memory_curve import memory_vs_nd
from ui.shared.page_state import enter_page
from ui.shared.url_state import sync_url
from ui.shared.widgets import confirm, grid, peek, show_notices, spec_input
from ui.zero import cache as cz
from ui.zero import figures as fz
from ui.zero import tabs as zt

SPECS = {**ZERO, **zp.PAGE, **zp.CUSTOM, **zp.MOE, **zp.MLA, **zp.ACT, **zp.WRAP, **zp.DEMO}

page_header("zero")
enter_page("zero", SPECS)
show_notices(sync_url(SPECS))  # every key checked before any widget exists, shown ones or not


def headline(v: dict):
    """The totals per GPU, drawn before any widget: (parameters, shape, activation inputs, view or None)."""
    def viewed(values: dict):
        q, shape, act = zv.from_inputs(values)
        return q, shape, act, cz.zero_view(q, shape, act)

    try:  # an input core refuses in combination is named and left at its default; the rest is computed
        (q, shape, act, view), _, reset = settled(viewed, v, SPECS)
    except InputError as exc:
        st.error(f"These inputs cannot be used: {exc}", icon=":material/error:")
        return None, None, None, None
    show_notices(reset, title="Some inputs cannot be combined, so their defaults are used:")
    for col, bar in zip(st.columns(4), view.bars, strict=True):
        col.metric(f"{bar.label} per GPU", fz.amount(bar.total, v["unit"]),
                   delta="fits" if bar.fits else "does not fit", delta_color="normal" if bar.fits else "inverse",
                   delta_arrow="off", help=f"{fz.both_units(bar.total)}; headroom {fz.both_units(bar.headroom)}; "
                                           f"smallest N_d that fits: {fz._nd_text(bar.smallest_nd)}")
    return q, shape, act, view


def inputs(v: dict, shape) -> None:
    """Model, GPU, unit and the activations switch; the expanders with everything else."""
    row = st.columns([4, 5, 4, 3])  # Psi, typed, needs room for 15 digits on a projector
    v["model"] = spec_input(zp.PAGE["model"], container=row[0])
    if v["model"] == "custom":
        v["params"] = spec_input(ZERO["params"], container=row[1])
    else:
        row[1].markdown(f"Parameters Psi (preset)  \n**{zv.preset_params(v['model']):,}**",
                        help="From the preset (assets/models.json); choose custom to type your own.")
    v["nd"] = spec_input(ZERO["nd"], container=row[2])
    v["stage"] = spec_input(ZERO["stage"], container=row[3])
    row = st.columns([4, 5, 4, 3])
    v["gpu"] = spec_input(zp.PAGE["gpu"], container=row[0])
    if v["gpu"] == "custom":
        v["gpu_mem"] = spec_input(ZERO["gpu_mem"], container=row[1])
    else:
        gpu = zv.preset_gpu(v["gpu"])
        row[1].metric("GPU memory", f"{gpu['gpu_mem']:g} GB",
                      help=f"From the GPU preset; the device reports {gpu['device_mem']:,.2f} GB to PyTorch, which a "
                           "framework's accounting is compared with.")
    v["unit"] = spec_input(zp.PAGE["unit"], container=row[2], widget="radio", horizontal=True)
    v["act"] = spec_input(zp.PAGE["act"])  # a row of its own: its label says what it adds

    custom = v["model"] == "custom"
    with st.expander("Optimizer, precision, the t x p split and experts"):
        experts = ("expert_params", "ep", "etp") if custom else ("ep", "etp")
        grid(v, ZERO, ("accounting", "optimizer", "precision", "k", "grad_dtype", "optimizer_dtype", "t", "p",
                       "split", "embedding", "ends_in_split", *experts), 3)
    with st.expander("Offload, reserve and cluster"):
        keys = ["offload", "reserve", "reserve_frac", "gpus", "largest_layer", "nvme_tb", "nvme_bw", "reshard"]
        grid(v, ZERO, keys + (["gpus_per_node", "bw"] if v["gpu"] == "custom" else []), 3)
    if custom:
        with st.expander("Custom model shape (activations, ZeRO-3's gathered blocks, FSDP units)"):
            grid(v, zp.CUSTOM, tuple(zp.CUSTOM), 3)
            if v.get("expert_params"):
                st.caption("Mixture of experts: the routed experts' shape (their activations and layers)")
                grid(v, zp.MOE, tuple(zp.MOE), 3)
            st.caption("Multi-head latent attention (kv_lora_rank > 0): its latents and head dims (activations)")
            grid(v, zp.MLA, tuple(zp.MLA), 3)
    if v["act"]:
        with st.expander("Activations: micro-batch, recomputation and the schedule they come from", expanded=True):
            grid(v, zp.ACT, tuple(zp.ACT), 3)
            if v["seq"] == 0 and shape is not None:
                st.caption(f"Sequence length 0: the model's own, **{shape.seq:,}** tokens.")


def tab_inputs(v: dict, tabs) -> None:
    """The inputs that live in the detail tabs (created every run, so their values are known before drawing)."""
    with tabs[2]:
        v["deepspeed"] = spec_input(ZERO["deepspeed"], label="Compare with DeepSpeed's estimator (stages 2 and 3)")
        v["deepspeed_zero2"] = spec_input(ZERO["deepspeed_zero2"], widget="radio", horizontal=True)
    with tabs[3]:
        grid(v, zp.WRAP, tuple(zp.WRAP), 2)
    with tabs[4]:
        grid(v, zp.DEMO, tuple(zp.DEMO), 5)


def main_view(q, view, unit: str, model: str) -> None:
    """Notes, the bars and the curve against N_d, the per-stage table."""
    for note in view.notes:
        st.warning(note, icon=":material/info:")
    if model != "custom":
        st.caption(zv.preset_note(model))
        if zv.preset_moe_note(model):
            st.info(zv.preset_moe_note(model), icon=":material/hub:")
    st.caption(zt.summary_caption(q, view, model))
    left, right = st.columns(2)
    left.plotly_chart(fz.memory_bars(view.bars, unit, view.gpu_bytes, view.report.usable, q.stage), key="zero_bars")
    right.plotly_chart(memory_vs_nd(view.curve, view.limits, unit, q.nd, view.gpu_bytes), key="zero_curve")
    frame = fz.stage_table(view.bars, view.report.stages, unit)
    st.dataframe(frame, hide_index=True, column_config=fz.number_format(frame))
    st.caption(("Model states follow the ZeRO paper (Rajbhandari et al. 2019). " if q.accounting == "textbook" else
                f"Counted as {q.accounting} stores them (core.frameworks), compared with the device's memory. ")
               + "'smallest N_d that fits' counts the activations and gathered layers too when they are on; "
               "offloaded stages are not sized by N_d.")


@st.fragment
def body() -> None:
    """Inputs and everything drawn from them, as a fragment: a widget step reruns this, not app.py."""
    v: dict = peek(SPECS)  # numbers first (ui.shared.widgets.peek): the values the inputs below will return
    peeked = dict(v)
    q, shape, _, view = headline(v)
    copy_link_box(v, SPECS, "zero")  # early: a link copied while the page reruns is already this view's
    first_paint()
    inputs(v, shape)
    main = st.container()  # filled once the tab inputs below are known
    tabs = st.tabs(list(zp.TABS), key="tab", bind="query-params")
    tab_inputs(v, tabs)
    confirm(peeked, v)  # the numbers above came from peeked values: rerun once if a widget disagreed
    if view is None:
        st.stop()
    unit = v["unit"]
    with main:
        main_view(q, view, unit, v["model"])
    sections = (lambda: zt.table1_tab(q, view, unit), lambda: zt.activations_tab(view, unit),
                lambda: zt.deepspeed_tab(q, view), lambda: zt.fsdp_tab(q, shape, view, v, unit),
                lambda: zt.equivalence_tab(v))
    for tab, draw in zip(tabs, sections, strict=True):
        with tab:
            if tab.open:  # drawn when opened: a hidden chart still costs the browser
                draw()


body()
