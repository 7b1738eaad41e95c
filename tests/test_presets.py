"""Presets load, carry their sources, match published figures, and custom inputs are validated."""

import math

import pytest

from core.errors import InputError
from core.model import presets
from core.model.config import GpuSpec, ModelConfig
from core.model.counts import model_params
from core.params import parse_lenient
from core.params.model import CLUSTER, MODEL, preset_choices

MODELS = ("gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "bloom-176b", "mtnlg-530b", "megatron-1t",
          "zero-7.5b")
GPUS = ("a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb", "b200-180gb", "mi300x-192gb", "v100-32gb")


def test_every_requested_preset_exists_and_names_a_source():
    assert set(MODELS) <= set(presets.model_keys())
    assert set(GPUS) <= set(presets.gpu_keys())
    for key in presets.model_keys():
        m = presets.model(key)
        assert len(m.source) > 20 and m.name
        if m.layout is not None:
            assert len(m.layout.source) > 20
    for key in presets.gpu_keys():
        assert len(presets.gpu(key).source) > 20


def test_loading_is_cached():
    assert presets.model("bloom-176b") is presets.model("bloom-176b")


@pytest.mark.parametrize("key,layers,hidden,heads,kv,seq", [
    ("gpt3-175b", 96, 12288, 96, 96, 2048),        # Brown et al. Table 2.1
    ("llama3-8b", 32, 4096, 32, 8, 8192),          # Llama 3 Herd Table 3
    ("llama3-70b", 80, 8192, 64, 8, 8192),
    ("llama3-405b", 126, 16384, 128, 8, 8192),
    ("bloom-176b", 70, 14336, 112, 112, 2048),      # BLOOM model card / tr11 script
    ("mtnlg-530b", 105, 20480, 128, 128, 2048),     # arXiv:2201.11990
    ("megatron-1t", 128, 25600, 160, 160, 2048),    # Narayanan et al. Table 1
])
def test_published_architectures(key, layers, hidden, heads, kv, seq):
    m = presets.model(key)
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.seq) == (layers, hidden, heads, kv, seq)


def test_bloom_count_matches_the_model_card_exactly():
    # 176,247,271,424 parameters (model card), with the embedding padded to 250,880 rows.
    m = presets.model("bloom-176b")
    assert m.params_published == 176_247_271_424
    assert model_params(m) == 176_247_271_424


def test_published_layouts():
    bloom = presets.model("bloom-176b").layout
    assert (bloom.t, bloom.p, bloom.d, bloom.zero_stage, bloom.gpus, bloom.gpu) == (4, 12, 8, 1, 384, "a100-80gb")
    assert (bloom.micro_batch_size, bloom.global_batch, bloom.recompute) == (2, 2048, "full")
    llama = presets.model("llama3-405b").layout
    assert (llama.t, llama.p, llama.d, llama.gpus, llama.gpu) == (8, 16, 64, 8192, "h100-80gb")
    assert llama.global_batch * presets.model("llama3-405b").seq == 2048 * 8192  # "16M tokens per batch"
    assert "micro_batch_size" in llama.assumed and "recompute" in llama.assumed
    mt = presets.model("mtnlg-530b").layout
    assert (mt.t, mt.p, mt.d, mt.global_batch) == (8, 35, 8, 1920)
    one_t = presets.model("megatron-1t").layout
    assert (one_t.t, one_t.p, one_t.d, one_t.gpus, one_t.global_batch) == (8, 64, 6, 3072, 3072)
    for key in presets.model_keys():
        lay = presets.model(key).layout
        if lay is not None:
            assert lay.t * lay.p * lay.d * lay.cp == lay.gpus


@pytest.mark.parametrize("key,tflops,mem,bf16,gpn", [
    ("a100-40gb", 312, 40, True, 8), ("a100-80gb", 312, 80, True, 8), ("h100-80gb", 989, 80, True, 8),
    ("h200-141gb", 989, 141, True, 8), ("b200-180gb", 2250, 180, True, 8), ("mi300x-192gb", 1307.4, 192, True, 8),
    ("v100-32gb", 125, 32, False, 16),
])
def test_gpu_datasheet_figures(key, tflops, mem, bf16, gpn):
    g = presets.gpu(key)
    assert (g.tflops, g.mem_gb, g.bf16, g.gpus_per_node) == (tflops, mem, bf16, gpn)
    assert g.peak_flops == tflops * 1e12 and g.mem_bytes == mem * 1e9
    if g.tflops_sparse is not None:
        assert g.tflops_sparse == pytest.approx(2 * g.tflops, rel=1e-3)   # dense is half the sparse headline
    assert g.intra_gbs == pytest.approx(g.intra_bidir_gbs / 2)            # per direction
    assert g.inter_gbs == pytest.approx(g.inter_gbits / 8)


def test_published_throughput_is_consistent_with_the_gpu_peak():
    # Llama 3 405B: 430 TFLOP/s per H100 reported as 43 % BF16 MFU; Megatron 1T: 163 TFLOP/s = 52 % of A100 peak.
    llama = presets.model("llama3-405b").layout.throughput[0]
    assert llama.tflops_per_gpu / presets.gpu("h100-80gb").tflops == pytest.approx(llama.mfu, abs=0.006)
    one_t = presets.model("megatron-1t").layout.throughput[0]
    assert one_t.tflops_per_gpu / presets.gpu("a100-80gb").tflops == pytest.approx(one_t.pct_peak, abs=0.005)


def test_custom_model_goes_through_the_same_validation():
    m = presets.custom_model({"layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "8", "ffn": "14336",
                              "vocab": "128256", "seq": "8192", "mlp": "swiglu", "tied": "false"})
    assert m.params_published is None
    assert m.params == pytest.approx(8.03e9, rel=1e-3)             # same shape as Llama 3 8B
    given = presets.custom_model({"params": "7.5e9"})
    assert given.params == 7.5e9


def test_custom_gpu():
    g = presets.custom_gpu({"gpu_mem": "96", "gpu_tflops": "500", "gpn": "4", "intra_bw": "200", "inter_bw": "25"})
    assert (g.mem_bytes, g.peak_flops, g.gpus_per_node, g.intra_bytes_per_s) == (96e9, 500e12, 4, 200e9)


GOOD = dict(name="x", layers=4, hidden=256, heads=8, kv_heads=8, ffn=1024, vocab=1000, seq=128)


@pytest.mark.parametrize("change,needle", [
    ({"heads": 0}, "out of range"),
    ({"layers": -3}, "out of range"),
    ({"layers": 2000}, "out of range"),
    ({"hidden": 250}, "divisible by heads"),
    ({"kv_heads": 3}, "multiple of kv_heads"),
    ({"kv_heads": 16}, "multiple of kv_heads"),
    ({"seq": math.nan}, "finite"),
    ({"ffn": 2.5}, "whole number"),
    ({"vocab": True}, "expected a number"),
    ({"mlp": "relu"}, "not allowed"),
    ({"tied": "maybe"}, "true or false"),
    ({"name": ""}, "empty"),
    ({"params_published": -1.0}, "out of range"),
    ({"layers": 1024, "hidden": 131072, "heads": 1024, "kv_heads": 1024, "ffn": 524288}, "parameters"),
])
def test_hostile_models_raise_input_error(change, needle):
    with pytest.raises(InputError, match=needle):
        ModelConfig(**{**GOOD, **change})


@pytest.mark.parametrize("change", [{"mem_gb": -80}, {"tflops": 0}, {"gpus_per_node": 0}, {"intra_gbs": math.inf},
                                    {"inter_gbs": "fast"}, {"bf16": 1}])
def test_hostile_gpus_raise_input_error(change):
    good = dict(name="g", mem_gb=80, tflops=989, gpus_per_node=8, intra_gbs=450, inter_gbs=50)
    with pytest.raises(InputError):
        GpuSpec(**{**good, **change})


def test_unknown_presets_and_keys_are_input_errors():
    with pytest.raises(InputError, match="unknown preset"):
        presets.model("gpt-5")
    with pytest.raises(InputError, match="unknown preset"):
        presets.gpu("<script>")
    with pytest.raises(InputError, match="unknown parameter"):
        presets.custom_model({"layer": "3"})


def test_spec_bounds_are_documented():
    assert (CLUSTER["gpus"].hi, MODEL["layers"].hi, MODEL["hidden"].hi) == (65536, 1024, 131072)
    assert all(s.help and s.label for s in (*MODEL.values(), *CLUSTER.values()))


def test_planner_url_keys_fall_back_leniently():
    specs = {**preset_choices(), "gpus": CLUSTER["gpus"], "batch": CLUSTER["batch"]}
    assert set(specs["model"].choices) == {*presets.model_keys(), "custom"}
    values, notices = parse_lenient(specs, {"model": "LLAMA3-405B", "gpu": "tpu", "gpus": "8192", "batch": "0"})
    assert values["model"] == "llama3-405b" and values["gpus"] == 8192
    assert values["gpu"] == specs["gpu"].default and values["batch"] == specs["batch"].default
    assert len(notices) == 2
