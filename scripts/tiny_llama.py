"""Write a random-weight tiny Llama (2 layers, hidden 128, context up to 4,096 positions) and a 512-token
BPE tokenizer trained in-process, so a real vLLM CPU build can serve it with no download.

Usage: ``python scripts/tiny_llama.py OUTDIR`` (needs torch, transformers, tokenizers; none of them is a
dependency of inferslice: this is for the optional real-engine path). The captured fixtures in
tests/fixtures/ were recorded from a vLLM 0.32.0 CPU server serving a model this recipe wrote.

Provenance: the recipe handed to the project with its brief (``recipes/tiny_llama.py``), reformatted,
same steps and seeds. Its BPE vocabulary is tiny, so text makes many tokens: keep requests within the
served ``max_model_len``.
"""

from __future__ import annotations

import sys
from typing import Any

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "hello world from a tiny test model",
    "prometheus grafana vllm ray serve kubernetes",
] * 50
CHAT_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"


def write_tiny_llama(out_dir: str) -> Any:
    """Write tokenizer and weights into ``out_dir``; return the model (for its parameter count)."""
    import torch  # heavy and optional: imported only when the recipe runs
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    hf.chat_template = CHAT_TEMPLATE
    hf.save_pretrained(out_dir)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(hf), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
        bos_token_id=hf.bos_token_id, eos_token_id=hf.eos_token_id, tie_word_embeddings=False,
    )  # fmt: skip
    cfg.torch_dtype = "bfloat16"
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)
    print("vocab", len(hf), "params", sum(p.numel() for p in model.parameters()))
    return model


if __name__ == "__main__":
    write_tiny_llama(sys.argv[1] if len(sys.argv) > 1 else "tiny-model")
