"""The Lecture page's words: each question with its numbers filled in, and each worked answer written
around the numbers core.views.lecture computed. Only formatting happens here (percentages, GB via core.units);
every number comes in from core. Kept apart from the page so pages/lecture.py stays a thin layout.
"""

from __future__ import annotations

from core.params.memory import MAX_ND
from core.units import fmt_bytes
from core.views import lecture
from ui.shared.tables import plural

# --- words that follow their numbers ------------------------------------------------------------------------


def pct(x: float) -> str:
    """A share as every answer prints it (and compares it: two shares that print the same are the same)."""
    return f"{x:.2%}"


def verb(before: float, after: float, fmt=pct, up: str = "rises", down: str = "falls", same: str = "stays") -> str:
    """The verb of a change, from the numbers as printed: two values that print the same have not moved."""
    if fmt(before) == fmt(after):
        return same
    return up if after > before else down


def moved(before: float, after: float, fmt=pct, up: str = "rises", down: str = "falls",
          same: str = "stays at") -> str:
    """'falls from 12.50% to 6.25%', 'rises from ...', or 'stays at 12.50%': the verb from the numbers as printed."""
    word = verb(before, after, fmt, up, down, same)
    return f"{word} {fmt(after)}" if word == same else f"{word} from {fmt(before)} to {fmt(after)}"


def changed(before: int, after: int, more: str, fewer: str) -> str:
    """The word for a count that grew, shrank or stayed ('deepened', 'shortened', 'kept')."""
    return more if after > before else fewer if after < before else "kept"


# --- practice exercises -----------------------------------------------------------------------------------


def q_e1(p: int, idle: float) -> str:
    return (f"A GPipe pipeline has **p = {p}** stages. What is the smallest number of micro-batches m that keeps "
            f"the idle share of the timeline at **{idle:g} % or less**? Check your answer with the simulator.")


def a_e1(a: lecture.MicrobatchAnswer) -> str:
    before = "" if a.formula_before is None else (
        f" One micro-batch fewer (m = {a.m_before:,}) would leave {a.formula_before:.2%} idle.")
    head = (f"**m = {a.m:,}.** The idle share of a flushed pipeline is (p-1)/(m+p-1); it shrinks as m grows, and "
            f"at m = {a.m:,} it is {a.formula_at_m:.2%}, the first value at or under {a.target:.2%} (pipeline "
            f"efficiency m/(m+p-1) = {a.efficiency_at_m:.2%}).{before}")
    if a.m_under != a.m:
        head += (f" Strictly *under* {a.target:.2%}, the wording of the module's step 2, needs **m = {a.m_under:,}**: "
                 f"at m = {a.m:,} the share equals the target exactly.")
    if a.simulated_at_m is None:
        return head + (f" The simulator stops at {lecture.M_MAX:,} micro-batches, so this answer rests on the "
                       "closed form alone; the dots on the figure are simulations at smaller m.")
    prev = "" if a.simulated_before is None else f" and {a.simulated_before:.2%} at m = {a.m_before:,}"
    verdict = "agrees" if a.verified else "disagrees"
    return head + (f"\n\nThe simulator {verdict}: it measures {a.simulated_at_m:.2%} idle at m = {a.m:,}{prev}. "
                   "The fill and the drain cost p-1 slots whatever m is, so m has to be many times p before they "
                   f"stop mattering.\n\n{rule_of_thumb(a)}")


def rule_of_thumb(a: lecture.MicrobatchAnswer) -> str:
    """GPipe's M >= 4 x K, with what the idle share says at that m (marked on the figure)."""
    sim = "" if a.rule_simulated is None else f", {a.rule_simulated:.2%} simulated"
    return (f"GPipe's rule of thumb: the overhead is negligible once **m >= 4 x p** (m = {a.rule_m:,} here). The "
            f"idle share there is still {a.rule_share:.2%} (closed form{sim}); GPipe's own runs recompute activations "
            "in the backward pass, which fills part of that idle time, so treat 4 x p as a floor, not a target.")


def q_e2(psi: float, mem: float) -> str:
    return (f"A model with **{psi:g} billion** parameters is trained with mixed-precision Adam on GPUs with "
            f"**{mem:g} GB** each. Counting model states only, what is the smallest data-parallel degree N_d at "
            "which ZeRO-3 fits? Can ZeRO-2 ever fit, however many GPUs you add?")


def a_e2(a: lecture.FitAnswer) -> str:
    nd3 = a.smallest_nd[3]
    if nd3 is None:
        z3 = f"**ZeRO-3 would need more than {MAX_ND:,} ranks**, beyond what this tool models."
    else:
        before = "" if a.states_before is None else (
            f", while {a.nd_before:,} ranks would need {fmt_bytes(a.states_before)}")
        z3 = (f"**ZeRO-3 fits from N_d = {nd3:,}**: everything is divided by N_d, so each GPU holds "
              f"{fmt_bytes(a.states_at[3])}{before}.")
    z2 = a.smallest_nd[2]
    if z2 is None:
        z2_text = (f"**ZeRO-2 never fits.** It still keeps the full 16-bit parameters on every GPU, a floor of "
                   f"{fmt_bytes(a.floor[2])} that no number of ranks removes, and that floor alone is more than "
                   f"the card's {fmt_bytes(a.usable)}.")
    else:
        z2_text = (f"**ZeRO-2 fits from N_d = {z2:,}**: its floor (the replicated 16-bit parameters, "
                   f"{fmt_bytes(a.floor[2])}) is below the card's {fmt_bytes(a.usable)}.")
    z1 = "never fits" if a.smallest_nd[1] is None else f"fits from N_d = {a.smallest_nd[1]:,}"
    return (f"{z3}\n\n{z2_text}\n\nFor comparison, ZeRO-1's floor (parameters and gradients) is "
            f"{fmt_bytes(a.floor[1])}, so it {z1}; plain data parallelism needs {fmt_bytes(a.floor[0])} on "
            "every GPU. Activations and buffers come on top of all of these.")


def q_e3(p: int, m: int, gb: float) -> str:
    return (f"At **p = {p}** and **m = {m}**, one micro-batch's activations on one stage take **{gb:g} GB**. "
            "How much does stage 0 hold at its peak under GPipe and under 1F1B, and what happens to the idle "
            "fraction?")


def a_e3(a: lecture.OneFOneBAnswer) -> str:
    g, o = a.gpipe, a.one_f_one_b
    same = "exactly the same" if pct(g.bubble) == pct(o.bubble) else "different"
    if f"{a.saving_gb:g}" == "0":
        saving = f"the same on stage 0: with m = {a.m} no more than p = {a.p}, GPipe never holds more than 1F1B does"
        verdict = "Here 1F1B buys nothing: there are too few micro-batches for GPipe to pile up."
    else:
        saving = f"a saving of {a.saving_gb:g} GB on stage 0"
        verdict = "1F1B buys memory, not speed."
    return (f"**GPipe: {g.held_gb:g} GB. 1F1B: {o.held_gb:g} GB**, {saving} (simulated: {g.held_stage0:g} against "
            f"{o.held_stage0:g} micro-batches held at once).\n\n"
            "Under GPipe, stage 0 runs every forward before its first backward, so all m micro-batches wait "
            "with their activations. 1F1B starts backward passes as soon as the first micro-batch returns, "
            "which caps stage 0 at about p held micro-batches.\n\n"
            f"The idle fraction is {same}: {pct(g.bubble)} for GPipe and {pct(o.bubble)} for 1F1B (makespans "
            f"{g.makespan:g} and {o.makespan:g}). The fill and drain do not move; only the order of work between "
            f"them does. {verdict}")


def q_e4(p: int, m: int) -> str:
    return (f"A paper reports the bubble as **(p-1)/m of the ideal time**. For **p = {p}** and **m = {m}**, what "
            "share of the whole timeline is idle? Compare with the simulation.")


def a_e4(a: lecture.ConventionAnswer) -> str:
    return (f"**{a.share:.2%} of the timeline.** The quoted number is x = (p-1)/m = {a.relative:.4f} of the ideal "
            f"time; as a share of the whole timeline it becomes x / (1 + x) = {a.share:.4f}, which is exactly "
            f"(p-1)/(m+p-1) = {a.formula_share:.4f}. The simulator measures {a.simulated_share:.4f} idle (and "
            f"{a.simulated_relative:.4f} relative to the busy time); the pipeline efficiency m/(m+p-1) is "
            f"{a.efficiency:.2%}.\n\nBoth conventions describe the same idle time; they differ in the denominator "
            "(ideal time or whole timeline). Read as an idle share, (p-1)/m "
            f"**overstates it by {a.overstatement:.1%}** here (simulated: {a.simulated_overstatement:.1%}): the "
            "overstatement is (p-1)/m itself, so the gap closes only as m grows.")


# --- checkpoint quiz --------------------------------------------------------------------------------------

QUIZ = (
    "In the GPipe schedule with p stages and m micro-batches, how many time slots does the forward phase take, "
    "and why?",
    "Why does increasing m shrink the bubble, and what does it cost?",
    "What does 1F1B change, and what does it leave alone?",
    "What is sharded at ZeRO stages 1, 2 and 3?",
    "Why does stage 3 cost 1.5 times the communication while stages 1 and 2 cost nothing extra?",
)


def a_q1(a: lecture.ForwardSlots) -> str:
    return (f"**m + p - 1 slots: {a.slots:g} at p = {a.p}, m = {a.m}.** The first micro-batch has to cross all p "
            f"stages before it leaves the pipeline (slot {a.first_exit:g} in the simulation); each of the other "
            "m - 1 micro-batches leaves one slot after the one before it. The backward phase mirrors it, so the "
            f"simulated step lasts {a.makespan_slots:g} slots of t_f + t_b.")


def a_q2(a: lecture.MoreMicrobatches) -> str:
    return (f"The fill and the drain always cost p - 1 slots; more micro-batches spread that fixed cost over more "
            f"useful work. Simulated at p = {a.p}: **{a.bubble_before:.2%} idle with m = {a.m_before}, "
            f"{a.bubble_after:.2%} with m = {a.m_after}**.\n\nThe cost: under GPipe stage 0 holds every micro-batch "
            f"until its backward, **{a.held_before:g} then {a.held_after:g} micro-batches** of activations; and "
            "smaller micro-batches keep the GPU's matrix units less busy.\n\nGPipe's rule of thumb is m >= 4 x p "
            f"(m = {a.rule_m} at p = {a.p}), where the idle share is still {a.rule_share:.2%} by the closed form.")


def a_q3(a: lecture.OneFOneBAnswer) -> str:
    g, o = a.gpipe, a.one_f_one_b
    return (f"It changes the **order** of work (a few warm-up forwards, then one forward, one backward) and so the "
            f"**memory**: at p = {a.p}, m = {a.m} stage 0 holds **{o.held_stage0:g}** micro-batches under 1F1B "
            f"against **{g.held_stage0:g}** under GPipe. It leaves the **bubble** alone: {o.bubble:.2%} idle for "
            f"both, and the same makespan ({o.makespan:g}).")


def a_q4(a: lecture.StageContents) -> list[dict]:
    """Rows for a table: per stage, what is sharded and the bytes per GPU of each component."""
    return [{"stage": r["title"], "sharded over N_d": ", ".join(r["sharded"]) or "nothing (replicated)",
             "parameters": fmt_bytes(r["params"]), "gradients": fmt_bytes(r["grads"]),
             "optimizer state": fmt_bytes(r["optimizer"]), "total per GPU": fmt_bytes(r["total"])}
            for r in a.rows]


A_Q4 = ("Each stage adds one more kind of state to what is split across the N_d ranks: stage 1 the optimizer "
        "state, stage 2 the gradients as well, stage 3 the parameters too. Everything not yet sharded stays as "
        "a full copy on every GPU.")


def a_q5(a: lecture.StageContents) -> str:
    v = {r["stage_label"]: r["volume [x Psi]"] for r in a.volumes}
    sent = {r["stage_label"]: r["sent per rank [bytes]"] for r in a.volumes}
    return (f"Plain data parallelism all-reduces the gradients: a reduce-scatter plus an all-gather, "
            f"**{v['DP']:g} Psi**. Stages 1 and 2 use the same two halves, only now each rank keeps just its slice "
            f"of the reduced gradient and all-gathers the updated parameters: **{v['ZeRO-1']:g} Psi and "
            f"{v['ZeRO-2']:g} Psi**. Stage 3 holds no full parameters at rest, so it gathers them before the forward "
            f"and again before the backward, then reduce-scatters the gradients: **{v['ZeRO-3']:g} Psi, "
            f"{a.stage3_over_dp:g} times** plain DP. For {a.psi:,.0f} parameters on N_d = {plural(a.nd, 'rank')} with "
            f"16-bit values, each rank sends {fmt_bytes(sent['DP'])} per step under DP, ZeRO-1 and ZeRO-2, and "
            f"{fmt_bytes(sent['ZeRO-3'])} under ZeRO-3.\n\n*Units:* {a.units_note}")


# --- active recall (seed 002) ------------------------------------------------------------------------------


def q_r1(psi: float, n: int) -> str:
    return (f"A **{psi:g}-billion**-parameter model is trained in mixed precision with Adam on **N = "
            f"{plural(n, 'GPU')}**. What is the per-GPU model-state memory under ZeRO stage 1, and under stage 3?")


RECOMPUTE_WORDS = {"none": "no recomputation", "selective": "selective recomputation", "full": "full recomputation"}
R1_SHAPE = ("For \"once activations are added\": the GPU and a shape for the model (heads of size 128), one "
            "micro-batch through every layer, no pipeline or tensor parallelism.")


def a_r1(a: lecture.StageContents, w: lecture.StatesWithActivations) -> str:
    t = {r["stage"]: r["total"] for r in a.rows}
    if a.nd == 1:
        split = ("On N = 1 GPU there is no other rank to split with: every stage keeps all 16 bytes per parameter, "
                 "as plain DP does")
    else:
        split = ("Stage 1 keeps the 16-bit parameters and gradients whole (4 bytes per parameter) and splits only "
                 f"the 12 bytes of optimizer state over the {a.nd:,} GPUs; stage 3 splits all 16")
    head = (f"**Stage 1: {fmt_bytes(t[1])}. Stage 3: {fmt_bytes(t[3])}.** {split}. Plain DP would need "
            f"{fmt_bytes(t[0])}.")
    gb = fmt_bytes(w.usable)
    lines = [f"- {RECOMPUTE_WORDS[mode]}: activations {fmt_bytes(x)}; stage 1 {fmt_bytes(w.totals[1][mode])} "
             f"({'fits' if w.fits[1][mode] else 'too large'}), stage 3 {fmt_bytes(w.totals[3][mode])} "
             f"({'fits' if w.fits[3][mode] else 'too large'})" for mode, x in w.activations.items()]
    return (f"{head}\n\nWith activations on ({w.heads} heads, one micro-batch, against {gb} per GPU), stage 1 "
            f"needs {fmt_bytes(w.totals[1]['none'])} without recomputation, {_stage1_verdict(w)}:\n\n"
            + "\n".join(lines) + f"\n\n{_stage3_verdict(w)}")


def _stage1_verdict(w: lecture.StatesWithActivations) -> str:
    if w.fits[1]["none"]:
        return "so at this shape stage 1 still fits with its activations"
    if w.states[1] > w.usable:
        return "so stage 1 is too large already without them, and more so once activations are added"
    return "so stage 1 is **still too large once activations are added**"


def _stage3_verdict(w: lecture.StatesWithActivations) -> str:
    if w.fits[3]["none"]:
        return "Stage 3 leaves room for the activations and a larger batch."
    fitting = [m for m in w.activations if w.fits[3][m]]
    if fitting:
        return f"Stage 3 fits only with {RECOMPUTE_WORDS[fitting[0]]}: the activations are what is left to cut."
    return "Even stage 3 does not fit at this shape: more GPUs, recomputation and a pipeline are all still needed."


def t_r2(p0: int, p1: int, m: int) -> str:
    return "R2. " + {"deepened": "A deeper pipeline", "shortened": "A shallower pipeline",
                     "kept": "The same pipeline"}[changed(p0, p1, "deepened", "shortened")]


def q_r2(p0: int, p1: int, m: int) -> str:
    how = {"deepened": "is stretched to", "shortened": "is cut down to", "kept": "keeps"}[changed(p0, p1, "deepened",
                                                                                                   "shortened")]
    return (f"A GPipe pipeline with p = {p0} stages and m = {m} micro-batches {how} **p = {p1}** stages "
            "while m stays the same. What is the new bubble fraction, and what else changes?")


def a_r2(a: lecture.DeeperPipeline) -> str:
    word = changed(a.p_before, a.p_after, "deepened", "shortened")
    if word == "kept":
        rest = ("Nothing else changes either: the same layers per device and the same "
                f"{plural(a.boundaries_after, 'stage boundary', 'stage boundaries')} per micro-batch.")
    else:
        layers = "fewer" if word == "deepened" else "more"
        memory = "less" if word == "deepened" else "more"
        rest = (f"Besides throughput: each device now holds {layers} layers ({memory} parameter and activation memory "
                f"per GPU), and every micro-batch crosses {a.boundaries_after} stage boundaries instead of "
                f"{a.boundaries_before}, each a point-to-point transfer.")
    grow = ("With m fixed the fill and drain grow with p while the useful work per device does not. " if word ==
            "deepened" else "With m fixed the fill and drain shrink with p. " if word == "shortened" else "")
    return (f"**{pct(a.bubble_after)} idle, against {pct(a.bubble_before)} before** (simulated): the bubble "
            f"{moved(a.bubble_before, a.bubble_after)}. {grow}{rest} Stages and micro-batches have to grow together.")


Q_R3 = "Why does ZeRO stage 2 keep plain DP's communication volume, while stage 3 needs more?"
def q_r4(n: int) -> str:
    """R4 uses R1's model and N (the answer computes with them, so the question names the same N)."""
    return (f"A team moved a {n:,}-GPU job (R1's model) that fitted in memory from DDP to FSDP, and the step time "
            "barely changed. They conclude FSDP saved nothing. What is wrong with that?")
Q_R5 = "In FSDP, why is one flat parameter per wrapped unit, not each weight tensor, what gets gathered and re-sharded?"


def a_r4(a: lecture.StageContents) -> str:
    t = {r["stage"]: r["total"] for r in a.rows}
    return ("FSDP shards storage, not computation: every GPU still runs the whole forward and backward on its own "
            "data, so the FLOPs per GPU are the same as under DDP, and the same step time is the expected result. "
            + _r4_memory(a, t[0], t[3]))


def _r4_memory(a: lecture.StageContents, ddp: float, sharded: float) -> str:
    if verb(ddp, sharded, fmt_bytes) == "stays":
        return (f"Here, on N = {plural(a.nd, 'GPU')}, memory did not change either: model states stay at "
                f"**{fmt_bytes(sharded)}** per GPU" + (" (there is no other rank to shard with)" if a.nd == 1 else "")
                + ". FSDP pays off from two GPUs on, the more the larger the model.")
    return (f"What changed is memory: for the {a.psi:,.0f}-parameter model on N = {plural(a.nd, 'GPU')}, model "
            f"states {verb(ddp, sharded, fmt_bytes, 'grow', 'drop')} from **{fmt_bytes(ddp)}** (DDP) to "
            f"**{fmt_bytes(sharded)}** (full sharding) per GPU. The payoff is a model, a batch or a sequence length "
            "that did not fit before.")


A_R5 = ("Collectives have a fixed cost per call. Gathering hundreds of small tensors one by one would pay it hundreds "
        "of times and leave the links half used; flattening a unit's parameters into one contiguous buffer lets FSDP "
        "issue one large all-gather (and one reduce-scatter for the gradients) per unit, which keeps the bandwidth "
        "high and the bookkeeping simple.")


def t_r6(p: int, m0: int, m1: int) -> str:
    word = changed(m0, m1, "more", "fewer")
    if word == "kept":
        return "R6. The same micro-batches"
    return "R6. " + ("Many more" if word == "more" and m1 >= 2 * m0 else "More" if word == "more" else "Fewer") \
        + " micro-batches"


def q_r6(p: int, m0: int, m1: int) -> str:
    how = {"more": "raises its micro-batch count", "fewer": "lowers its micro-batch count",
           "kept": "keeps its micro-batch count"}[changed(m0, m1, "more", "fewer")]
    count = f"at **m = {m1}**" if m0 == m1 else f"from **m = {m0}** to **m = {m1}**"
    return (f"A GPipe pipeline with **p = {p}** {how} {count}. What happens to the bubble, and what does the "
            "formula not show?")


def a_r6(a: lecture.MoreMicrobatches) -> str:
    head = f"**The bubble {moved(a.bubble_before, a.bubble_after)}** (simulated)."
    word = changed(a.m_before, a.m_after, "more", "fewer")
    if word == "kept":
        return head + (f" Nothing moves: stage 0 holds the same **{a.held_after:g}** micro-batches. What the formula "
                       "would hide when m changes is memory: GPipe keeps every micro-batch's activations until the "
                       "backward.")
    if word == "more":
        return head + (f" What the formula hides is memory: GPipe keeps every micro-batch's activations until the "
                       f"backward, so stage 0 now holds **{a.held_after:g}** micro-batches instead of "
                       f"{a.held_before:g}, unless activations are recomputed (more compute) or the schedule is 1F1B "
                       "(at most about p held).")
    return head + (f" What the formula hides is memory, the other way round: GPipe keeps every micro-batch's "
                   f"activations until the backward, so stage 0 now holds only **{a.held_after:g}** micro-batches "
                   f"instead of {a.held_before:g}. Fewer micro-batches buy memory with a larger bubble.")
