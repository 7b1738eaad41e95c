"""Megatron-DeepSpeed and pre-2022 Megatron-LM launch scripts (BigScience's BLOOM script is the model of the one
below, written for this test): `export`ed launcher variables, `--checkpoint-activations`, `--pad-vocab-size-to`,
`--deepspeed --zero-stage` read into the row the validation table times for BLOOM."""

from core.configs import shell
from core.configs.check import check

BLOOM = r"""#!/bin/bash
NNODES=48
GPUS_PER_NODE=8
TP_SIZE=4
PP_SIZE=12
ZERO_STAGE=0
config_json="./ds_config.$SLURM_JOBID.json"
GPT_ARGS=" \
    --num-layers 70 \
    --hidden-size 14336 \
    --num-attention-heads 112 \
    --seq-length 2048 \
    --micro-batch-size 2 \
    --global-batch-size 2048 \
    --tokenizer-type PretrainedFromHF \
    --tokenizer-name-or-path bigscience/tokenizer \
    --embed-layernorm \
    --bf16 \
    --position-embedding-type alibi \
    --checkpoint-activations \
    --pad-vocab-size-to 250880 \
    "
DEEPSPEED_ARGS=" \
    --deepspeed \
    --deepspeed_config ${config_json} \
    --zero-stage ${ZERO_STAGE} \
    --deepspeed-activation-checkpointing \
    "
export LAUNCHER="python -u -m torch.distributed.run \
    --nproc_per_node $GPUS_PER_NODE \
    --nnodes $NNODES \
    "
export CMD=" \
    `pwd`/pretrain_gpt.py \
    --tensor-model-parallel-size $TP_SIZE \
    --pipeline-model-parallel-size $PP_SIZE \
    $GPT_ARGS \
    $DEEPSPEED_ARGS \
    "
srun --jobid $SLURM_JOBID bash -c "$LAUNCHER --node_rank \$SLURM_PROCID $CMD"
"""


def test_exported_variables_are_assignments_so_the_launcher_gives_the_gpus():
    script = shell.read(BLOOM)
    assert script.launcher[:4] == ["python", "-u", "-m", "torch.distributed.run"]
    assert "--nnodes" in script.launcher and "48" in script.launcher


def test_a_megatron_deepspeed_script_reads_as_bloom_under_deepspeeds_engine():
    done = check([("tr11-176B-ml.slurm", BLOOM)], {"gpu": "a100-80gb"})
    raw, row = done.reading.raw, done.row
    assert raw["model"] == "bloom-176b"  # 70 x 14336, 112 heads, the padded 250,880 vocabulary: the preset exactly
    assert raw["gpus"] == "384" and (row["t"], row["p"], row["d"]) == (4, 12, 8)
    assert raw["recompute"] == "full" and raw["zero"] == "1"  # BF16_Optimizer shards at stage 0
    assert raw["compute_stack"] == "megatron-deepspeed" and raw["memory_framework"] == "deepspeed"
    assert done.reading.framework == "deepspeed" and done.refusals() == []
    assert not [e for e in done.reading.entries if e.kind == "unsupported" and e.name.startswith("--")]


def test_legacy_checkpoint_layers_and_an_explicit_zero_stage():
    text = BLOOM.replace("--checkpoint-activations", "--checkpoint-activations --checkpoint-num-layers 2") \
        .replace("ZERO_STAGE=0", "ZERO_STAGE=1").replace("--bf16", "--fp16")
    done = check([("run.sh", text)], {"gpu": "a100-80gb"})
    assert done.reading.raw["zero"] == "1" and done.reading.raw["precision"] == "fp16"
    assert any(e.name == "--recompute-num-layers" and e.kind == "unsupported" for e in done.reading.entries)


EVAL = """#!/bin/bash
GPUS_PER_NODE=8
NNODES=2
WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))
GPT_ARGS="
    --num-layers 40 \\
    --hidden-size 5120 \\
    --num-attention-heads 64 \\
    --seq-length 1024 \\
    --micro-batch-size 4 \\
    --global-batch-size 64 \\
    --fp16 \\
    --tensor-model-parallel-size 8
"
OUTPUT_ARGS="
    --log-interval 1
"
cmd="deepspeed --num_gpus $GPUS_PER_NODE --num_nodes $NNODES \\
    pretrain_gpt.py \\
    $GPT_ARGS \\
    $OUTPUT_ARGS
    "
eval $cmd
"""


def test_a_command_built_in_a_string_with_multiline_arguments_and_deepspeeds_launcher():
    # `cmd="deepspeed ... pretrain_gpt.py $GPT_ARGS"; eval $cmd`: the arguments' line breaks are word breaks, not
    # new commands, and DeepSpeed's launcher counts --num_gpus x --num_nodes
    done = check([("pretrain_gpt3_13b.sh", EVAL)])
    raw = done.reading.raw
    assert (raw["gpus"], raw["fix_t"], raw["batch"], raw["mb_sizes"]) == ("16", "8", "64", "4")
    assert done.row["d"] == 2 and raw["precision"] == "fp16"
