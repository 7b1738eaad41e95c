"""The Planner page's "Check a run you have": paste or upload a config (Megatron-LM script, torchtitan TOML or
registry, Megatron-Bridge recipe, DeepSpeed JSON with config.json, a framework's run YAML), see its row and every
field's account, open it as planner inputs.
The numbers and words are core's (core.views.config_check, as `python -m core check` prints them); a file is not
part of the page's link, the inputs it sets are."""

from __future__ import annotations

import math

import streamlit as st

from core.errors import InputError
from core.params.planner import PLAN
from core.views.config_check import MAX_OVERRIDES, CheckView
from core.views.config_check import checked as check_view
from ui.shared.cache import cached
from ui.shared.links import link_to_page

TYPES = ["sh", "bash", "toml", "json", "yaml", "yml", "py", "txt", "cfg"]
UPLOAD_MB = 1  # per file: core.configs.formats.MAX_BYTES (1 MB) rounds up to Streamlit's MiB


@cached(max_entries=16, max_size="32MB")
def checked(files: tuple[tuple[str, bytes], ...], overrides: str) -> CheckView:
    """Cached core.views.config_check.checked (a config is read and planned once per content and overrides)."""
    return check_view(files, overrides)


def check_section() -> None:
    with st.expander("Check a run you have: paste or upload its config"):
        st.caption("A Megatron-LM command or launch script, a torchtitan TOML or Python config registry, a "
                   "Megatron-Bridge recipe, a LLaMA-Factory, Axolotl, LLM Foundry, torchtune or NeMo Automodel YAML, "
                   "a DeepSpeed JSON or an Accelerate YAML (with the model's Hugging Face "
                   "config.json), a Hugging Face config.json, a NeMo 1 YAML, or this planner's PyTorch script. A "
                   "registry or recipe file with several runs: paste the launch command that names one (CONFIG=NAME "
                   "./run_train.sh ..., "
                   "train.sh --recipe NAME ...). Nothing in it is run. At most 4 files of 1 MB. Same numbers: "
                   "`python -m core check FILE`.")
        uploads = st.file_uploader("Config files", type=TYPES, accept_multiple_files=True, key="check_files",
                                   max_upload_size=UPLOAD_MB)
        pasted = st.text_area("... or paste one", key="check_text", height=140, max_chars=1_000_000,
                              placeholder="torchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size "
                                          "8 ...")
        # not a URL key (a config is not in the link), so no widget key: the URL tests bind every keyed input
        given = st.text_input("What the file cannot say (KEY=VALUE, ...)", max_chars=MAX_OVERRIDES,
                              placeholder="gpu=h100-80gb, gpus=256",
                              help="Planner inputs by key (gpu, gpus, batch, seq, model, precision, ...) or the "
                                   "plan --fix keys (t, p, d, cp, ep, replicate, ...); they win over the file.")
        files = tuple((u.name, u.getvalue()) for u in uploads or ())
        if pasted.strip():
            files += (("pasted", pasted.encode("utf-8")),)
        if not files:
            return
        try:  # core bounds the files (count, size, lines, nesting) before reading them
            view = checked(files, given)
        except InputError as exc:
            st.error(f"This config cannot be checked: {exc}", icon=":material/block:")
            return
        _show(view)


def _show(view: CheckView) -> None:
    m = view.metrics
    cols = st.columns(4)
    cols[0].metric("Memory per GPU", "—" if math.isnan(m["memory_gb"]) else f"{m['memory_gb']:,.1f} GB",
                   help=None if math.isnan(m["usable_gb"]) else f"of {m['usable_gb']:,.1f} GB usable (GB = 1e9 bytes)")
    cols[1].metric("Fits", "yes" if m["fits"] else "no")
    cols[2].metric("Step time", "—" if math.isnan(m["step_s"]) else f"{m['step_s']:,.2f} s")
    cols[3].metric("MFU", "—" if math.isnan(m["mfu"]) else f"{100 * m['mfu']:.1f} %")
    st.markdown("\n".join(f"- {line}" for line in (view.headline, *view.lines)))
    counts = ", ".join(f"{n} {kind}" for kind, n in view.counts.items())
    st.caption(f"Every field of the file ({counts}):")
    st.dataframe(view.account, hide_index=True, key="check_account")
    cols = st.columns(2)
    with cols[0]:
        link_to_page("planner", view.run_inputs, PLAN, label="Open this run in the planner",
                     icon=":material/open_in_new:", help="The planner's inputs set as the file says, the layout "
                                                         "pinned: its row with links to the Pipeline and ZeRO pages.")
    with cols[1]:
        link_to_page("planner", view.better_inputs, PLAN, label="Better layouts for this run",
                     icon=":material/search:", help="The same model, GPUs, batch and switches; the layout free.")
    st.code(view.typed, language="bash")
