"""Layer variants beyond the plain transformer block: mixture-of-experts MLPs and multi-head latent attention.

Kept as small frozen descriptions hung off a ModelConfig (`model.moe`, `model.mla`; None = the plain block), so a
dense model carries no MoE fields at all and every module that does not care about experts is untouched.
Names follow the frameworks: Megatron-LM's --num-experts / --moe-router-topk / --moe-ffn-hidden-size /
--moe-layer-freq, Hugging Face's n_routed_experts / num_experts_per_tok / first_k_dense_replace.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import InputError
from core.params.model import MODEL


def _whole(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(f"{name}: expected a whole number from {lo:,} to {hi:,}, got {value!r}")
    return value


@dataclass(frozen=True)
class MoeConfig:
    """Routed experts replace the MLP of every `every`-th layer after the first `first_dense` dense layers.

    experts: routed experts per MoE layer; top_k: routed experts each token visits; shared: always-on experts
    (DeepSeekMoE) of the same width; expert_ffn: each expert's inner width (0 = the model's ffn). groups /
    group_topk: group-limited routing (Megatron-Core --moe-router-num-groups / --moe-router-group-topk, HF n_group /
    topk_group): the experts fall into `groups` equal groups of consecutive experts and each token picks its experts
    inside its best `group_topk` groups; DeepSeek-V3's 8 / 4 keep a token on at most 4 servers (arXiv:2412.19437,
    3.2.2). 1 / 1 = no limit.
    """

    experts: int
    top_k: int
    shared: int = 0
    expert_ffn: int = 0
    first_dense: int = 0
    every: int = 1
    groups: int = 1
    group_topk: int = 1

    def __post_init__(self) -> None:
        _whole("experts", self.experts, 1, int(MODEL["experts"].hi))
        _whole("top_k", self.top_k, 1, self.experts)
        _whole("shared_experts", self.shared, 0, int(MODEL["shared_experts"].hi))
        _whole("expert_ffn", self.expert_ffn, 0, int(MODEL["expert_ffn"].hi))
        _whole("dense_layers", self.first_dense, 0, int(MODEL["layers"].hi))
        _whole("moe_every", self.every, 1, int(MODEL["layers"].hi))
        _whole("route_groups", self.groups, 1, self.experts)
        _whole("group_topk", self.group_topk, 1, self.groups)
        if self.experts % self.groups:
            raise InputError(f"route_groups: {self.groups} groups do not split {self.experts} experts evenly")

    def layer_counts(self, layers: int) -> tuple[int, int]:
        """(dense layers, MoE layers) of a `layers`-deep model: Megatron's moe_layer_freq pattern after the
        first `first_dense` layers."""
        rest = max(0, layers - self.first_dense)
        moe = -(-rest // self.every)  # layers first_dense, first_dense + every, ... are MoE
        return layers - moe, moe


@dataclass(frozen=True)
class MlaConfig:
    """Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values pass through low-rank latents.

    Per head, queries and keys have qk_head_dim + qk_rope_dim channels, values v_head_dim. q_lora_rank 0 = queries
    projected directly from the hidden state (DeepSeek-V2-Lite).
    """

    kv_lora_rank: int
    qk_head_dim: int
    qk_rope_dim: int
    v_head_dim: int
    q_lora_rank: int = 0

    def __post_init__(self) -> None:
        hi = int(MODEL["hidden"].hi)
        _whole("kv_lora_rank", self.kv_lora_rank, 1, hi)
        _whole("qk_head_dim", self.qk_head_dim, 1, hi)
        _whole("qk_rope_dim", self.qk_rope_dim, 0, hi)
        _whole("v_head_dim", self.v_head_dim, 1, hi)
        _whole("q_lora_rank", self.q_lora_rank, 0, hi)
