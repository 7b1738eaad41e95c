"""ZeRO memory: bytes per GPU under plain data parallelism and ZeRO 1-3, what offload, activations and FSDP
wrapping change, and a live check that sharding Adam changes nothing.
Inputs -> core (core.views.zero, cached in ui.cache_zero) -> figures.

The body reads top to bottom: headline (numbers first) -> inputs -> the tabs' inputs -> the main view -> each tab.
"""


import streamlit as st

from core.errors import InputError
from core.params import zero_page as zp
from core.params.memory import ZERO
from core.views import zero as zv
from core.views.fallback import settled
from core.views.pipeline import takes_v
from ui import cache_zero as cz
from ui import figures_zero as fz
from ui.layout import first_paint, page_header
from ui.links import copy_link_box
from ui.page_state import enter_page
from ui.tables import plural
from ui.url_state import sync_url
from ui.widgets import confirm, grid, peek, show_notices, spec_input

SPECS = {**ZERO, **zp.PAGE, **zp.CUSTOM, **zp.MOE, **zp.ACT, **zp.WRAP, **zp.DEMO}

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
        row[1].metric("GPU memory", f"{zv.preset_gpu(v['gpu'])['gpu_mem']:g} GB", help="From the GPU preset.")
    v["unit"] = spec_input(zp.PAGE["unit"], container=row[2], widget="radio", horizontal=True)
    v["act"] = spec_input(zp.PAGE["act"])  # a row of its own: its label says what it adds

    custom = v["model"] == "custom"
    with st.expander("Optimizer, precision, the t x p split and experts"):
        experts = ("expert_params", "ep", "etp") if custom else ("ep", "etp")
        grid(v, ZERO, ("optimizer", "precision", "k", "t", "p", "split", "embedding", *experts), 3)
    with st.expander("Offload, reserve and cluster"):
        keys = ["offload", "reserve", "reserve_frac", "gpus", "largest_layer", "nvme_tb", "nvme_bw", "reshard"]
        grid(v, ZERO, keys + (["gpus_per_node", "bw"] if v["gpu"] == "custom" else []), 3)
    if custom:
        with st.expander("Custom model shape (activations, ZeRO-3's gathered blocks, FSDP units)"):
            grid(v, zp.CUSTOM, tuple(zp.CUSTOM), 3)
            if v.get("expert_params"):
                st.caption("Mixture of experts: the routed experts' shape (their activations and layers)")
                grid(v, zp.MOE, tuple(zp.MOE), 3)
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


def summary_caption(q, view, model: str) -> str:
    rep, bpp = view.report, view.report.bytes_per_param
    text = (f"Psi = {q.params:,} parameters; t = {q.t}, p = {q.p} ({q.split} split) leaves {rep.psi_rank:,.0f} per "
            f"GPU before ZeRO. Bytes per parameter ({bpp.label}{', FP8 GEMMs' if q.precision == 'fp8' else ''}): "
            f"parameters {rep.dense_kw['param_bytes']:.3g}, gradients {bpp.grad_bytes:g}, optimizer K = {bpp.k:g}. "
            f"Offload: {q.offload}. Usable per GPU: {fz.both_units(rep.usable)}. GB = 1e9 bytes, GiB = 2^30 bytes.")
    a = view.act
    if a:
        text += (f" Activations: the first stage holds {plural(a.inflight, 'micro-batch', 'micro-batches')}, the "
                 f"last {a.inflight_last:g} "
                 f"(simulated for {a.schedule} with p = {a.p}, m = {a.m}); {fz.both_units(a.peak)} at the peak, on "
                 f"the {a.worst} stage. ZeRO-3 also holds its gathered layers.")
    return text


def main_view(q, view, unit: str, model: str) -> None:
    """Notes, the bars and the curve against N_d, the per-stage table."""
    for note in view.notes:
        st.warning(note, icon=":material/info:")
    if model != "custom":
        st.caption(zv.preset_note(model))
        if zv.preset_moe_note(model):
            st.info(zv.preset_moe_note(model), icon=":material/hub:")
    st.caption(summary_caption(q, view, model))
    left, right = st.columns(2)
    left.plotly_chart(fz.memory_bars(view.bars, unit, view.gpu_bytes, view.report.usable, q.stage), key="zero_bars")
    right.plotly_chart(fz.memory_vs_nd(view.curve, view.limits, unit, q.nd, view.gpu_bytes), key="zero_curve")
    frame = fz.stage_table(view.bars, view.report.stages, unit)
    st.dataframe(frame, hide_index=True, column_config=fz.number_format(frame))
    st.caption("Model states follow the ZeRO paper (Rajbhandari et al. 2019). 'smallest N_d that fits' counts "
               "the activations and gathered layers too when they are on; offloaded stages are not sized by N_d.")


def table1_tab(q, view, unit: str) -> None:
    st.subheader("The paper's Table 1 for this model")
    t1 = fz.in_unit(view.table1, unit)
    st.dataframe(t1, hide_index=True, column_config=fz.number_format(t1))
    st.caption(f"Model states per GPU at the paper's data-parallel degrees (plus N_d = {q.nd:,}), in {unit}. "
               "With Psi = 7.5e9 and mixed-precision Adam this is the paper's 7.5B column.")
    st.subheader("Communication per step")
    c = fz.in_unit(view.comm, unit).drop(columns=["stage", "key"]).rename(columns={"stage_label": "stage"})
    st.dataframe(c, hide_index=True, column_config=fz.number_format(c, 3))
    st.caption(f"Ring collectives over N_d = {q.nd:,} ranks at {q.bw:g} GB/s per rank; 16-bit values. "
               "Volume in multiples of Psi as N_d grows: 2, 2, 2, 3 (ZeRO paper, section 7). " + view.units_note)


def activations_tab(view, unit: str) -> None:
    if view.act is None:
        st.info("Turn on 'Add activations and working buffers' above to add the activations of the fuller end "
                "stage.")
        return
    a = view.act
    v_text = f", v = {a.v}" if takes_v(a.schedule) else ""
    first = plural(a.inflight, "micro-batch", "micro-batches", bold=True)
    same = " (the same device: a V-shaped schedule)" if a.last_on_first else ""
    st.markdown(f"Schedule **{a.schedule}**, p = {a.p}, m = {a.m}{v_text}: the pipeline simulator measures {first} "
                f"in flight on the first stage's device and **{a.inflight_last:g}** on the last stage's{same}.")
    cols = st.columns(3)
    cols[0].metric("Per layer, per micro-batch", fz.both_units(a.per_layer))
    cols[1].metric("Layers on a device", f"{a.layers_per_device:g}")
    cols[2].metric("Peak activations", fz.both_units(a.peak), help=f"On the {a.worst} stage.")
    modes = fz.modes_table(a.modes, unit)
    st.dataframe(modes, hide_index=True, column_config=fz.number_format(modes, 3))
    st.caption("Korthikanti et al. 2022: 34 s b h + 5 a s^2 b bytes per layer and micro-batch without "
               "parallelism; the table shows every mode for the same s, b, h, a, t. The 5 a s^2 b term "
               "(attention scores) dominates at long sequences; selective recomputation drops it, as "
               "fused (flash) attention kernels do.")


def deepspeed_tab(q, view) -> None:
    st.markdown(
        "DeepSpeed's `estimate_zero2/zero3_model_states_mem_needs` count differently from the paper: 32-bit "
        "gradients beside the 16-bit ones (18 bytes per parameter), the largest layer gathered in full at "
        "stage 3, a 1.5 buffer factor on the CPU, and they print bytes / 2^30 labelled 'GB'. "
        "DeepSpeed sees the whole model on N_d GPUs (no t, p).")
    rep = view.report
    if q.deepspeed and "deepspeed_gpu" in rep.stages.get("zero3", {}):
        ds = fz.stage_table(view.bars, rep.stages, "GiB")
        keep = ["stage", "offload", "total on GPU [GiB]", "DeepSpeed GPU [GiB]", "DeepSpeed CPU per node [GiB]"]
        st.dataframe(ds[[c for c in keep if c in ds]], hide_index=True, column_config=fz.number_format(ds))
        st.caption("ZeRO-2 without offload: " + "; ".join(f"**{k}** = {x}" for k, x in zv.DS_ZERO2.items())
                   + f". Shown: {q.deepspeed_zero2}.")
    else:
        st.caption("Turn the comparison on to see both estimates side by side (in GiB).")


def fsdp_tab(q, shape, view, v: dict, unit: str) -> None:
    rep = view.report
    try:
        fs = cz.fsdp_view(q.params, q.nd, shape.layers, shape.block_params, v["min_params"], v["prefetch"],
                          rep.bytes_per_param)
    except InputError as exc:
        st.warning(f"FSDP comparison unavailable: {exc}")
        return
    st.markdown("Wrapping only the root makes the whole model one FSDP unit: at its peak every parameter "
                "and gradient is unsharded at once. Wrapping each block first keeps one block (two with "
                "prefetch) unsharded at a time.")
    st.plotly_chart(fz.fsdp_bars(fs, unit, rep.usable), key="zero_fsdp")
    table = fz.in_unit(fs, unit)
    st.dataframe(table, hide_index=True, column_config=fz.number_format(table))
    st.caption(f"Whole model (Psi = {q.params:,}) fully sharded over N_d = {q.nd:,}; {shape.layers} blocks "
               f"of {shape.block_params:,.0f} parameters.")


def equivalence_tab(v: dict) -> None:
    try:
        eq = cz.equivalence_run(*(v[k] for k in zp.DEMO))
    except InputError as exc:
        st.warning(f"Demo not run: {exc}")
        return
    cols = st.columns(4)
    cols[0].metric("max |sharded - replicated|", f"{eq.max_abs_diff:.1e}")
    cols[1].metric("with global-norm clipping", f"{eq.max_abs_diff_clipped:.1e}")
    cols[2].metric("Adam state per rank, replicated", f"{eq.state_per_rank_replicated:,}")
    sharded = " / ".join(f"{x:,}" for x in eq.state_per_rank_sharded[:4])
    cols[3].metric("Adam state per rank, sharded", sharded + (" ..." if eq.ranks > 4 else ""))
    st.markdown(
        f"{eq.ranks} ranks train the same toy problem for {eq.steps} Adam steps, once with every rank "
        "holding all of Adam's moments (plain DP) and once with each rank holding only its slice "
        f"(ZeRO 1/2). The largest difference between the final parameters is **{eq.max_abs_diff!r}**: "
        "Adam works element by element, so slicing its state changes no arithmetic. Clipping by the "
        f"global norm ({eq.clipped_steps} of {eq.steps} steps clipped) costs one extra scalar all-reduce "
        f"per step and still gives {eq.max_abs_diff_clipped!r} when the partial sums are added in the same "
        f"order; summing the squares in one go instead differs by {eq.max_abs_diff_clipped_one_sum:.1e}. "
        f"All ranks identical: plain DP **{eq.replicas_identical}**, sharded **{eq.sharded_identical}**. "
        f"Mean |theta - target| {eq.error_start:.3f} -> {eq.error_end:.3f} (loss {eq.loss_start:.3f} -> "
        f"{eq.loss_end:.3f}).")


@st.fragment
def body() -> None:
    """Inputs and everything drawn from them, as a fragment: a widget step reruns this, not app.py."""
    v: dict = peek(SPECS)  # numbers first (ui.widgets.peek): the values the inputs below will return
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
    sections = (lambda: table1_tab(q, view, unit), lambda: activations_tab(view, unit),
                lambda: deepspeed_tab(q, view), lambda: fsdp_tab(q, shape, view, v, unit), lambda: equivalence_tab(v))
    for tab, draw in zip(tabs, sections, strict=True):
        with tab:
            if tab.open:  # drawn when opened: a hidden chart still costs the browser
                draw()


body()
