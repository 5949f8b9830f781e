"""The offline tiny preset: a Qwen2-architecture model built from a config, with a locally trained tokenizer.

It must behave like a *pretrained* base, because the memorization audits compare a fine-tuned model against
what a base model already predicts (Prior-Aware's P̂(s), PEARL's unperturbed baseline, round 0). So the
preset (1) trains a byte-level BPE tokenizer on a public corpus disjoint from the clients' private data, and
(2) pretrains the model on that corpus. Both are cached under ``<cache_dir>/tiny-<hash>/`` keyed by the
architecture, the corpus and the seed, so later runs (and every Flower client) just load them.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import torch

from fedmem.common.cache import building
from fedmem.common.io import atomic_dir
from fedmem.common.progress import progress_bar
from fedmem.engine.config import TinyModelConfig

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tiny_cache_key(cfg: TinyModelConfig, corpus: list[str], seed: int) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(vars(cfg), sort_keys=True).encode())
    h.update(str(seed).encode())
    for text in corpus:
        h.update(hashlib.sha256(text.encode()).digest())
    return h.hexdigest()[:16]


def train_tokenizer(corpus: list[str], vocab_size: int):
    """Byte-level BPE (as Qwen2.5's), ChatML special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def qwen2_model(vocab_size: int, hidden_size: int, intermediate_size: int, num_hidden_layers: int,
                num_attention_heads: int, num_key_value_heads: int, seed: int = 0, **config):
    """A randomly initialised Qwen2 causal LM (seeded), in train mode: the tiny preset's architecture, and the
    small real models of the tests and benches. ``config``: further ``Qwen2Config`` fields."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    return Qwen2ForCausalLM(Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers, num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads, **config,
    ))


def build_model(cfg: TinyModelConfig, tokenizer, seed: int):
    return qwen2_model(
        len(tokenizer), cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.num_attention_heads,
        cfg.num_key_value_heads, seed=seed, max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def pretrain(model, tokenizer, corpus: list[str], cfg: TinyModelConfig, seed: int, max_len: int, progress: bool):
    """Plain next-token training on the public corpus, packed into ``max_len`` blocks."""
    ids: list[int] = []
    for text in corpus:
        ids.extend(tokenizer(text)["input_ids"] + [tokenizer.pad_token_id])
    n_blocks = max(1, len(ids) // max_len)
    blocks = torch.tensor(ids[: n_blocks * max_len] or ids, dtype=torch.long).view(n_blocks, -1)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.pretrain_lr, weight_decay=0.01)
    steps = cfg.pretrain_epochs * math.ceil(n_blocks / cfg.pretrain_batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.pretrain_lr, total_steps=max(steps, 1), pct_start=0.1)
    model.train()
    losses = []
    with progress_bar(steps, "pretrain tiny base", enabled=progress) as bar:
        for _ in range(cfg.pretrain_epochs):
            perm = torch.randperm(n_blocks, generator=gen)
            for i in range(0, n_blocks, cfg.pretrain_batch_size):
                batch = blocks[perm[i : i + cfg.pretrain_batch_size]]
                loss = model(input_ids=batch, labels=batch).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                losses.append(loss.item())
                bar.advance(loss=loss.item())
    model.eval()
    return losses


def load_or_build_tiny(cfg: TinyModelConfig, corpus: list[str], seed: int, cache_dir: str, progress: bool = True):
    """Return the cached tiny base (model, tokenizer), building and pretraining it on a cache miss."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not corpus:
        raise ValueError("the tiny preset needs a public corpus to train its tokenizer and prior "
                         "(the data source gave none)")
    key = tiny_cache_key(cfg, corpus, seed)
    target = Path(cache_dir) / f"tiny-{key}"
    with building(target):
        if not (target / "done").exists():
            tokenizer = train_tokenizer(corpus, cfg.vocab_size)
            model = build_model(cfg, tokenizer, seed)
            losses = pretrain(model, tokenizer, corpus, cfg, seed, cfg.max_position_embeddings // 2, progress)
            with atomic_dir(target) as tmp:  # a crash never leaves a half-written cache entry behind
                model.save_pretrained(tmp)
                tokenizer.save_pretrained(tmp)
                (tmp / "pretrain.json").write_text(json.dumps({"losses": losses[:: max(1, len(losses) // 50)],
                                                                "final_loss": losses[-1] if losses else None}))
                (tmp / "done").write_text("ok")
    tokenizer = AutoTokenizer.from_pretrained(target)
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    model.eval()
    return model, tokenizer, str(target)
