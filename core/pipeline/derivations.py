"""Where each closed form comes from, in words: the Pipeline page's "derivation" and the CLI's.

The formulas themselves, their conditions and conventions live in core.pipeline.formulas; this module
only explains them. Every claim of exactness here is checked by the tests against the simulator
(tests/test_pipeline_schedules.py, tests/test_pipeline_memory_schedules.py).
"""

from __future__ import annotations

from core.pipeline.formulas import CONDITIONS

CONVENTION_WORDS = {
    "makespan": "makespan convention: a device's idle time between 0 and the end of the whole timeline",
    "span": "span convention (the Zero Bubble paper's): a device's idle time between its own first and last "
            "operation, so the later start of later devices is not counted",
}

_FILL_DRAIN = ("The last device starts its first forward only after the p-1 devices before it have each run "
               "one forward: (p-1) t_f of waiting. At the end, the first device runs its last backward p-1 "
               "backward steps after the last device: (p-1) t_b more. Every device waits (p-1)(t_f+t_b) in "
               "total, whatever m. Over the makespan (m+p-1)(t_f+t_b) that is the idle share (p-1)/(m+p-1); "
               "relative to the ideal m(t_f+t_b) it is (p-1)/m.")

DERIVATIONS = {
    "gpipe": _FILL_DRAIN + " GPipe holds all m micro-batches at its peak.",
    "1f1b": _FILL_DRAIN + " 1F1B reorders the same work (one forward, one backward) so device d holds at "
                          "most p-d micro-batches: the bubble is GPipe's, the memory is not.",
    "pipedream": "The fill and drain of 1F1B, (p-1)(t_f+t_b), are paid once: with no flush the next iteration's "
                 "forwards fill the drain. The price is stale weights (up to p versions stashed on device 0).",
    "interleaved": "Each device holds v chunks of 1/v of its layers, so a fill or drain step moves one chunk: the "
                   "same p-1 steps cost (t_f+t_b)/v each, (p-1)(t_f+t_b)/v in all. Megatron-LM runs micro-batches "
                   "in rounds of p, hence m a multiple of p. The price: v times more point-to-point messages and "
                   "a first device holding p(1 + (p-1)/(pv)) micro-batches.",
    "looped-bfs": "The chunks of interleaving, run breadth-first (all micro-batches through chunk 0, then chunk "
                  "1, ...): the fill and drain shrink by v as in interleaving, but every micro-batch of every "
                  "chunk is held at the peak.",
    "zb-h1": "The backward is split into B (input gradient, on the critical path: the previous device waits "
             "for it) and W (weight gradient, needed only by the optimizer). Device d defers d of its W's; they "
             "fill the drain, so each of the p-1 fill/drain steps is T_W shorter: (p-1)(T_F+T_B-T_W). Memory "
             "stays 1F1B's p, since a deferred W keeps only what its backward already held.",
    "zb-h2": "ZB-H1 plus extra warm-up forwards (2(p-1-d)+1 on device d) that fill the start: one more T_W "
             "saved per step, (p-1)(T_F+T_B-2T_W), zero when T_F = T_B = T_W. The warm-up needs m >= 2p-1 "
             "micro-batches to exist, and each device then holds up to 2p-1 of them.",
    "zbv": "Two chunks per device in a V (device d holds stages d and 2p-1-d) put the first and the last stage "
           "on device 0, so the turn from forward to backward needs no hop. With T_F = T_B = T_W the warm-up "
           "is exactly filled by second-chunk forwards and the cool-down by W's, at 1F1B's peak of p. The "
           "pattern needs 2p-1 micro-batches: with fewer, the gaps stay (p=8, m=8: 22.6 % idle).",
    "dualpipev": "DualPipe cut in half (Sea AI Lab's \"cut-in-half\"): a V over p devices, 2p stages of half a "
                 "device each, PP = 2p in the formula below.",
    "dualpipe": "Half the micro-batches enter at device 0 and half at device p-1, through two copies of the "
                "model. A micro-batch meets PP/2 stages before the middle instead of PP, so the fill and drain "
                "last PP/2-1 steps, not PP-1. In the steady state a step is an overlapped pair F&B (one "
                "direction's forward with the other's backward). In the fill a device waits for a pair per "
                "step, in the drain for a full backward B per step: F&B+B. Three weight-gradient chunks per "
                "step are deferred into those gaps (the far direction's first backwards split into B and W, "
                "and the split backwards of the drain), hence -3W. F&B is taken as F+B here: the simulator "
                "does not model the communication a pair hides. The form is exact when t_f = t_b and "
                "t_w <= t_f; otherwise the W's no longer fit the gaps.",
}
DERIVATIONS["dualpipev"] = DERIVATIONS["dualpipev"] + " " + DERIVATIONS["dualpipe"]

# Schedules without an exact closed form: what their source says instead, and why the memory is what it is.
ESTIMATES = {
    "v-half": "No exact closed form. Qi et al. 2024 estimate the idle share as about B/2, B = (p-1)/(m+p-1) "
              "(1F1B's), when T_F = T_B = T_W. Memory: a schedule that repeats one building block every 6 "
              "slots holds about its block's lifespan (from a micro-batch's first forward on a device to its "
              "last backward there) divided by 6. V-Half's block on device 0 spans about 6p slots, so about p "
              "first-chunk micro-batches are alive at once, each half a device's layers: (p+2)//2 "
              "micro-batches' worth, about half of 1F1B's p.",
    "v-min": "No exact closed form. Qi et al. 2024 estimate the idle share as about 2B/3 plus an O(p) overhead, "
             "B = (p-1)/(m+p-1), when T_F = T_B = T_W. Its building block is the tightest (about 4p slots on "
             "device 0, so about 2p/3 half-device chunks alive): (p+4)//3 micro-batches' worth, about a third "
             "of 1F1B's. The tight block leaves gaps "
             "the steady state cannot fill when T_F, T_B and T_W differ, so V-Min loses throughput there.",
}


def explain(schedule: str) -> dict[str, str]:
    """The words for one schedule: derivation (or the source's estimate) and the conditions of its form."""
    return {"derivation": DERIVATIONS.get(schedule) or ESTIMATES.get(schedule, ""),
            "conditions": CONDITIONS.get(schedule, "")}
