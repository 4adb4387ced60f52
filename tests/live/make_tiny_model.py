"""Build a tiny random Llama model and a word-level tokenizer trained on local text.

Run with the vLLM environment's Python (it needs torch, transformers and tokenizers, which
fleetplan's own environment does not have): ``python make_tiny_model.py OUT_DIR [WORDS_FILE]``.

No weights are downloaded: the model is ``LlamaForCausalLM`` with random weights (seed 0); the
tokenizer is a ``WordLevel`` model trained on the words of local text (Python's own
documentation strings and, if given, a file of words that prompts will use, so that each prompt
word is one token). Prints the written folder and the model's parameter count as JSON.
"""

from __future__ import annotations

import json
import pydoc
import re
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL = ["<unk>", "<s>", "</s>"]
VOCAB_SIZE = 4096


def local_corpus(extra_words: list[str]) -> list[str]:
    """Text that is on every machine: docstrings of Python's standard modules."""
    lines = [" ".join(extra_words)] * 50
    for name in ("json", "pathlib", "re", "collections", "functools", "itertools", "argparse",
                 "subprocess", "threading", "asyncio", "typing", "dataclasses", "email",
                 "http.client", "unittest", "logging", "datetime", "decimal", "random"):
        try:
            text = pydoc.render_doc(name, renderer=pydoc.plaintext)
        except ImportError:
            continue
        lines.extend(re.sub(r"[^A-Za-z ]+", " ", text).lower().split("\n"))
    return [ln for ln in lines if ln.strip()]


def main() -> None:
    out = Path(sys.argv[1])
    words = Path(sys.argv[2]).read_text().split() if len(sys.argv) > 2 else []
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL,
                                        min_frequency=1)
    tok.train_from_iterator(local_corpus(words), trainer)
    missing = [w for w in words if tok.token_to_id(w) is None]
    if missing:
        raise SystemExit(f"prompt words missing from the vocabulary: {missing[:10]}")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")
    fast.save_pretrained(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=1024, bos_token_id=1, eos_token_id=2,
                      tie_word_embeddings=False, torch_dtype="float32")
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(out, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    print(json.dumps({"dir": str(out), "params": n, "vocab_size": tok.get_vocab_size()}))


if __name__ == "__main__":
    main()
