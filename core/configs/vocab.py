"""Vocabulary sizes of the tokenizers launch scripts name instead of giving --vocab-size (from each model's
published config.json: vocab_size)."""

from __future__ import annotations

KNOWN = (  # (substring of the tokenizer name or path, vocabulary, whose)
    ("llama-3", 128256, "Llama 3 / 3.1 config.json vocab_size"),
    ("llama3", 128256, "Llama 3 / 3.1 config.json vocab_size"),
    ("mixtral", 32000, "Mixtral config.json vocab_size"),
    ("mistral-7b", 32000, "Mistral 7B config.json vocab_size"),
    ("llama-2", 32000, "Llama 2 config.json vocab_size"),
    ("deepseek-v3", 129280, "DeepSeek-V3 config.json vocab_size"),
    ("deepseek-v2", 102400, "DeepSeek-V2 config.json vocab_size"),
    ("qwen3", 151936, "Qwen3 config.json vocab_size"),
    ("qwen2", 151936, "Qwen2.5 config.json vocab_size"),
    ("nemotron", 256000, "Nemotron-4 tokenizer (256K SentencePiece)"),
)


def tokenizer_vocab(kind: str, model: str) -> tuple[int, str]:
    """(vocabulary, why) for a Megatron --tokenizer-type / --tokenizer-model pair, or (0, why not)."""
    if kind == "GPT2BPETokenizer":
        return 50257, "GPT-2's BPE vocabulary"
    name = model.lower()
    for key, size, whose in KNOWN:
        if key in name:
            return size, f"{model}: {whose}"
    return 0, f"the tokenizer {kind} {model[:40]} is not one the importer knows"
