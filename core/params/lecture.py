"""Inputs of the Lecture page: the numbers inside each practice exercise and quiz question.

Every question of the page reads its numbers from these specs, so a lecturer can move a slider in class
and the question text, the figure and the (live) answer change together; the URL keeps them. Keys are
grouped by question: `e1_*` .. `e4_*` the practice exercises, `q_*` the checkpoint quiz, `r*_*` the
active-recall questions. The defaults are the numbers printed in the course material (seeds 000 and 002),
so an unchanged page reproduces them.

`ANSWERS` holds the "reveal answer" state of every question (an expander bound to the URL), so a shared
link opens with the same answers revealed. `LECTURE_VIEW` is the part of the lecture on screen.

Ranges: pipeline questions stay within the simulator's range (core.params.pipeline) so each answer can be
checked against a simulation; model sizes are in billions of parameters because that is how a lecture
states them.
"""

from __future__ import annotations

from core.params import Spec, table
from core.params.pipeline import PIPELINE

P_MAX = int(PIPELINE["p"].hi)  # 64: the simulator's largest pipeline
M_MAX = int(PIPELINE["m"].hi)  # 1024
PSI_MAX_B = 100_000.0  # billions of parameters (1e14, core.params.memory.MAX_PSI)
PARTS = ("Exercises", "Quiz", "Recall")

LECTURE = table(
    # Exercise 1: micro-batches for a bubble of at most X % at p stages.
    Spec("e1_p", "int", 8, 2, P_MAX, label="Pipeline stages p", help="Stages of the GPipe pipeline."),
    Spec("e1_idle", "float", 10.0, 0.5, 50.0, label="Largest idle share allowed", unit="%",
         help="The bubble may be at most this share of the whole timeline."),
    # Exercise 2: which ZeRO stage can ever fit the model states on one GPU.
    Spec("e2_psi", "float", 70.0, 0.5, 2000.0, label="Model size", unit="billion parameters",
         help="Trainable parameters, mixed-precision Adam (16 bytes per parameter before sharding)."),
    Spec("e2_mem", "float", 80.0, 8.0, 256.0, label="GPU memory", unit="GB (1e9 bytes)",
         help="Memory of one GPU; the exercise counts model states only."),
    # Exercise 3: the activation memory 1F1B saves.
    Spec("e3_p", "int", 4, 2, 32, label="Pipeline stages p"),
    Spec("e3_m", "int", 16, 1, 256, label="Micro-batches m"),
    Spec("e3_gb", "float", 1.0, 0.1, 50.0, label="Activations of one micro-batch on one stage",
         unit="GB (1e9 bytes)"),
    # Exercise 4: converting a bubble quoted relative to ideal time into an idle share.
    Spec("e4_p", "int", 4, 2, P_MAX, label="Pipeline stages p"),
    Spec("e4_m", "int", 16, 1, M_MAX, label="Micro-batches m"),
    # Checkpoint quiz: one pipeline and one ZeRO setting shared by its five questions.
    Spec("q_p", "int", 4, 2, P_MAX, label="Pipeline stages p"),
    Spec("q_m", "int", 8, 1, 512, label="Micro-batches m",
         help="The quiz also simulates 2m micro-batches, so m stays at or below half the simulator's limit."),
    Spec("q_psi", "float", 7.5, 0.5, PSI_MAX_B, label="Model size", unit="billion parameters"),
    Spec("q_nd", "int", 64, 1, 1 << 20, label="Data-parallel degree N_d"),
    # Active recall (seed 002): Q1 per-GPU states, Q2 deeper pipeline, Q6 more micro-batches.
    Spec("r1_psi", "float", 13.0, 0.5, PSI_MAX_B, label="Model size", unit="billion parameters"),
    Spec("r1_n", "int", 16, 1, 1 << 20, label="GPUs N (data-parallel degree)"),
    # Recall 1's "once activations are added": a shape for the model (40 layers of width 5120, as 13B models
    # such as Llama 2 13B have; heads of size 128), GPT-3's 2048-token context, one sequence per micro-batch.
    Spec("r1_mem", "float", 80.0, 8.0, 256.0, label="GPU memory", unit="GB (1e9 bytes)"),
    Spec("r1_hidden", "int", 5120, 128, 65536, label="Hidden size h",
         help="Model width; the attention heads are taken as h / 128 (head size 128)."),
    Spec("r1_layers", "int", 40, 1, 1024, label="Layers L"),
    Spec("r1_seq", "int", 2048, 1, 1 << 17, label="Sequence length s", unit="tokens"),
    Spec("r1_mb", "int", 1, 1, 1024, label="Micro-batch size b", unit="sequences"),
    Spec("r2_p0", "int", 4, 2, P_MAX, label="Stages before"),
    Spec("r2_p1", "int", 8, 2, P_MAX, label="Stages after"),
    Spec("r2_m", "int", 8, 1, M_MAX, label="Micro-batches m"),
    Spec("r6_p", "int", 4, 2, P_MAX, label="Pipeline stages p"),
    Spec("r6_m0", "int", 8, 1, M_MAX, label="Micro-batches before"),
    Spec("r6_m1", "int", 64, 1, M_MAX, label="Micro-batches after"),
)

_ANSWER_KEYS = ("e1_ans", "e2_ans", "e3_ans", "e4_ans", "q1_ans", "q2_ans", "q3_ans", "q4_ans", "q5_ans",
                "r1_ans", "r2_ans", "r3_ans", "r4_ans", "r5_ans", "r6_ans")

ANSWERS = table(*(Spec(k, "bool", False, label="Answer", help="Open to reveal the answer, computed live.")
                  for k in _ANSWER_KEYS))

LECTURE_VIEW = table(
    Spec("part", "choice", PARTS[0], choices=PARTS, label="Part of the lecture",
         help="Practice exercises, the checkpoint quiz, or the active-recall questions."),
)
