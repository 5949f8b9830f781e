"""Throughput of the full PEARL audit on a tiny-preset-sized model (CPU).

    python bench/pearl.py                      # default audit.pearl sizes, 3 clients
    python bench/pearl.py --n 8 --nonmembers 4 --threads 1    # a quicker run, one torch thread (steadier when shared)

Model: the tiny preset's Qwen2 (hidden 128, 4 layers, vocab 2048; its BPE recipe trained here on seeded text),
prefix 30 / suffix 64 tokens, untrained weights (so every output runs the full 64-token budget: worst case).
Prints audited samples per second, the time split (perturb / generate / score / MIA) and, as the baseline
measured in the same run, the speed of generating the same requests one prompt per call (what the audit
would cost without the single batched call).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from fedmem.audit.base import AuditedModel, AuditPool
from fedmem.audit.pearl import PearlConfig, PearlSensitivity
from fedmem.audit.pool import header_ids, text_sample
from fedmem.engine.config import Decoding

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "pe", "da", "gu", "ri", "an", "el", "or", "us",
             "th", "st", "ch", "br", "on", "er", "in", "at"]


def corpus(n_sentences: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(SYLLABLES, rng.integers(1, 4))) for _ in range(6000)]
    return [" ".join(rng.choice(words, rng.integers(8, 20))).capitalize() + "." for _ in range(n_sentences)]


def build(seed: int):
    """The tiny preset's tokenizer recipe and model (TinyModelConfig defaults = conf/model/tiny.yaml), untrained."""
    from fedmem.engine.config import TinyModelConfig
    from fedmem.engine.model.tiny import build_model, train_tokenizer

    cfg = TinyModelConfig()
    tok = train_tokenizer(corpus(4000, seed), cfg.vocab_size)
    return tok, build_model(cfg, tok, seed).eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--n", type=int, default=PearlConfig().n, help="audit.pearl.n (members per client)")
    ap.add_argument("--nonmembers", type=int, default=PearlConfig().nonmembers,
                    help="audit.pearl.nonmembers (non-members per client)")
    ap.add_argument("--samples", type=int, default=10, help="outputs per intensity")
    ap.add_argument("--prefix", type=int, default=30)
    ap.add_argument("--suffix", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32, help="AuditedModel.generation_batch_size (sequences per pass)")
    ap.add_argument("--perturbation", default="bitflip")
    ap.add_argument("--baseline-samples", type=int, default=1, help="samples generated one prompt per call")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    tok, model = build(seed=0)
    texts = corpus(args.clients * (args.n + args.nonmembers) * 4, seed=1)
    train, test, k, header = {}, {}, 0, header_ids(tok)
    for c in range(args.clients):
        train[c], test[c] = [], []
        for split, dest, count in (("train", train[c], args.n), ("test", test[c], args.nonmembers)):
            for i in range(count):
                text = " ".join(texts[k : k + 4])
                k += 4
                ids = tok(text, add_special_tokens=False)["input_ids"]
                dest.append(text_sample(tok, ids, header, args.prefix, c, split, i, args.suffix))
    run = AuditPool(train=train, test=test, train_sizes={c: args.n for c in train}, tokenizer=tok,
                   decoding=Decoding(), prefix_len=args.prefix, prompt_header=header, seed=0)
    setup_s = time.perf_counter() - t0
    print(f"setup (tokenizer, model, samples): {setup_s:.1f}s; torch threads {torch.get_num_threads()}")

    # the samples are bare texts, not records with a training rendering: PEARL runs in MR's prompt context
    cfg = PearlConfig(n=args.n, nonmembers=args.nonmembers, samples_per_intensity=args.samples,
                      perturbation=args.perturbation, context="prompt")
    t0 = time.perf_counter()
    method = PearlSensitivity(cfg, run)
    build_s = time.perf_counter() - t0
    audited = AuditedModel(pool=run, round=1, model=model, generation_batch_size=args.batch_size)
    t0 = time.perf_counter()
    section = method.audit(audited)
    audit_s = time.perf_counter() - t0
    tm = section["seconds"]
    n_samples = section["n_members"] + section["n_nonmembers"]
    total = build_s + audit_s
    gen_tokens = tm["generations"] * args.suffix
    print(f"PEARL audit: {n_samples} samples x {len(cfg.intensities)} intensities x {args.samples} outputs = "
          f"{tm['generations']} generations of <= {args.suffix} tokens (batch {args.batch_size})")
    print(f"  total {total:.1f}s -> {n_samples / total:.3f} samples/s "
          f"({tm['generations'] / tm['generate']:.1f} generations/s, <= {gen_tokens / tm['generate']:.0f} tokens/s)")
    print(f"  split: perturb {tm['perturb']:.2f}s | generate {tm['generate']:.2f}s | score {tm['score']:.2f}s | "
          f"mia {tm['mia']:.2f}s | other {total - tm['perturb'] - tm['generate'] - tm['score'] - tm['mia']:.2f}s")

    # Baseline, same run: the same requests for a few samples, one audited.generate call per prompt.
    m = max(1, min(args.baseline_samples, len(method.prompts)))
    prompts = [p for row in method.prompts[:m] for p in row]
    base_ctx = AuditedModel(pool=run, round=1, model=model, generation_batch_size=args.batch_size)
    t0 = time.perf_counter()
    for p in prompts:
        base_ctx.generate([p], max_new_tokens=args.suffix, num_samples=args.samples)
    base_s = time.perf_counter() - t0
    base_rate = len(prompts) * args.samples / base_s
    print(f"baseline (one prompt per call, {m} sample(s)): {base_rate:.1f} generations/s; "
          f"batched single call: {tm['generations'] / tm['generate']:.1f} generations/s "
          f"-> x{(tm['generations'] / tm['generate']) / base_rate:.2f}")


if __name__ == "__main__":
    main()
