"""The ZeRO page's detail tabs and its summary caption, drawn from the page's view (core.views.zero.ZeroView):
Table 1 and communication, activations, DeepSpeed's estimator, FSDP wrapping and the sharded-Adam demo.

Drawing only: every number comes from the view or from ui.zero.cache's cached core calls.
"""

import streamlit as st

from core.errors import InputError
from core.params import zero_page as zp
from core.views import zero as zv
from core.views.pipeline import takes_v
from ui.shared.tables import plural
from ui.zero import cache as cz
from ui.zero import figures as fz


def summary_caption(q, view, model: str) -> str:
    rep, bpp = view.report, view.report.bytes_per_param
    text = (f"Psi = {q.params:,} parameters; t = {q.t}, p = {q.p} ({q.split} split) leaves {rep.psi_rank:,.0f} per "
            f"GPU before ZeRO. Bytes per parameter ({bpp.label}{', FP8 GEMMs' if q.precision == 'fp8' else ''}"
            f"{'' if q.accounting == 'textbook' else ', as ' + q.accounting + ' stores them'}): "
            f"parameters {rep.dense_kw['param_bytes']:.3g}, gradients {rep.dense_kw['grad_bytes']:g}, optimizer "
            f"K = {rep.dense_kw['k']:g}. "
            f"Offload: {q.offload}. Usable per GPU: {fz.both_units(rep.usable)}. GB = 1e9 bytes, GiB = 2^30 bytes.")
    a = view.act
    if a:
        text += (f" Activations: the first stage holds {plural(a.inflight, 'micro-batch', 'micro-batches')}, the "
                 f"last {a.inflight_last:g} "
                 f"(simulated for {a.schedule} with p = {a.p}, m = {a.m}); {fz.both_units(a.peak)} at the peak, on "
                 f"the {a.worst} stage. ZeRO-3 also holds its gathered layers.")
        if q.accounting != "textbook":
            text += (" The grey part is what the framework adds: its buffers and workspaces, the optimizer step's "
                     "excess over the activation peak, the caching allocator's reserve (fitted on measured peaks) and "
                     "the CUDA context with NCCL's buffers.")
    return text


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
                f"in flight on the first stage's device and **{a.inflight_last:g}** on the last stage's{same}"
                + (f"; **{a.inflight_middle:g}** at most on another device, which holds whole middle stages (the "
                   "ends count in the split)." if a.middle_stage else "."))
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
