"""Writes a random-weight tiny Llama (2 layers, hidden 128) and a 512-token BPE tokenizer trained in-process,
so a real vLLM (CPU build) can serve it with no download. Usage: python tiny_llama.py OUTDIR (needs torch, transformers, tokenizers).

Provenance: copied unchanged (but for this paragraph and lint) from the project's shared recipes (tiny_llama.py), used there
for the real-vLLM checks recorded in the integration contracts."""

import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

d = sys.argv[1] if len(sys.argv) > 1 else "tiny-model"
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tr = trainers.BpeTrainer(vocab_size=512, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
corpus = [
    "the quick brown fox jumps over the lazy dog",
    "hello world from a tiny test model",
    "prometheus grafana vllm ray serve kubernetes",
] * 50
tok.train_from_iterator(corpus, tr)
hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
hf.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
hf.save_pretrained(d)
torch.manual_seed(0)
cfg = LlamaConfig(
    vocab_size=len(hf),
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    max_position_embeddings=4096,
    bos_token_id=hf.bos_token_id,
    eos_token_id=hf.eos_token_id,
    tie_word_embeddings=False,
)
cfg.torch_dtype = "bfloat16"
m = LlamaForCausalLM(cfg).to(torch.bfloat16)
m.save_pretrained(d, safe_serialization=True)
print("vocab", len(hf), "params", sum(p.numel() for p in m.parameters()))
