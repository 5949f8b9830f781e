"""What a model preset can memorize: train it on the clients' data (centrally, no Flower) and measure, epoch by
epoch, how close its members' suffixes come to extractable, against held-out texts of the same clients.

    python scripts/capacity.py [--epochs 12] [--every 3] [--variant "train.lr=2e-2" ...] [overrides ...]

    python scripts/capacity.py                                            # tiny preset, synthetic source
    python scripts/capacity.py model=small                                # the small preset
    python scripts/capacity.py task=text data=local data.path=kjv.jsonl data.client_column=section

``overrides`` are ``fedmem run`` overrides (the experiment's own config: preset, data, sizes, audit lengths).
Each ``--variant`` (space-separated overrides on top) is trained from the same seed; without one, the preset's
own settings are the only variant. Per evaluation it prints, for up to ``audit.samples_per_client`` members and
the test non-members of every client (the audit's prefix and suffix lengths):

- median log10 P(s|p) of members and non-members, and their difference (what training added);
- extractable: members with P(s|p) >= m (Prior-Aware's threshold for the suffix length), with a 95% interval;
- verbatim: members whose greedy continuation reproduces the whole suffix;
- canaries (synthetic source): extractable canaries by copy count;
- seconds per epoch.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from fedmem.audit.intervals import wilson
from fedmem.audit.pool import build_audit_pool
from fedmem.audit.prior_aware import default_m
from fedmem.config.compose import compose_dict
from fedmem.config.experiment import from_dict
from fedmem.engine.config import Decoding
from fedmem.engine.generation import generate_batched
from fedmem.engine.scoring import sequence_logprobs
from fedmem.engine.train import train_local
from fedmem.experiment.loading import federated_data, fresh_lora_model, sequence_length
from fedmem.experiment.training import train_examples


def rate_ci(k: int, n: int) -> str:
    """k/n in percent with its Wilson 95% interval (``fedmem.audit.intervals``)."""
    if n == 0:
        return "n/a"
    lo, hi = wilson(k, n)
    return f"{100 * k / n:5.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def evaluate(model, tokenizer, members, others, m: float, suffix_len: int) -> dict:
    """Prior-Aware's P(s|p) (s: the first ``suffix_len`` tokens after the prefix, in the audits' prompt context)
    and greedy verbatim reproduction of s."""
    pairs = lambda ss: [(s.prompt_ids, s.suffix_ids[:suffix_len]) for s in ss]  # noqa: E731
    lp_m = sequence_logprobs(model, pairs(members)) / math.log(10)
    lp_o = sequence_logprobs(model, pairs(others)) / math.log(10)
    outs = generate_batched(model, tokenizer, [s.prompt_ids for s in members], suffix_len,
                            decoding=Decoding(strategy="greedy"))
    verbatim = sum(o[0][:suffix_len] == list(s.suffix_ids[:suffix_len]) for o, s in zip(outs, members))
    ext = lp_m >= math.log10(m)
    canaries: dict[int, list[bool]] = {}
    for s, e in zip(members, ext):
        if "canary" in s.tags:
            canaries.setdefault(int(s.tags["copies"]), []).append(bool(e))
    return {"member": float(np.median(lp_m)), "other": float(np.median(lp_o)), "extractable": int(ext.sum()),
            "verbatim": int(verbatim), "n": len(members), "best": float(lp_m.max()),
            "canaries": {c: f"{sum(v)}/{len(v)}" for c, v in sorted(canaries.items())}}


def run_variant(overrides: list[str], epochs: int, every: int) -> None:
    cfg = from_dict(compose_dict([*overrides, "train.progress=false"]))
    data = federated_data(cfg)
    t0 = time.perf_counter()
    model, tokenizer = fresh_lora_model(cfg)  # builds the offline base on a cache miss, with every core
    base_seconds = time.perf_counter() - t0
    torch.set_num_threads(cfg.simulation.torch_threads)  # then train as one client does
    run = build_audit_pool(cfg.audit, cfg.task, data, tokenizer, cfg.seed)
    members = [s for c in run.clients for s in run.train[c]]
    others = [s for c in run.clients for s in run.test[c]]
    examples, truncated = train_examples(cfg, None)
    suffix_len = cfg.audit.sections["pa"].suffix_len
    m = default_m(suffix_len)
    n_params = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    print(f"\n## {' '.join(overrides) or '(preset defaults)'}\n")
    print(f"base parameters {n_params / 1e6:.1f} M (loaded or built in {base_seconds:.0f} s); {len(examples)} train examples ({truncated} cut at "
          f"{sequence_length(cfg)} tokens); {len(members)} members and {len(others)} held-out texts audited; "
          f"prefix {cfg.audit.prefix_len}, suffix {suffix_len} tokens, m = {m:g}; lr {cfg.train.lr}, "
          f"LoRA r {cfg.model.lora_r}\n")
    print("| epoch | train loss | s/epoch | median log10 P member | held-out | difference | best member | "
          "extractable (P >= m) | verbatim (greedy) | canaries extractable by copies |")
    print("|---|---|---|---|---|---|---|---|---|---|")

    def show(epoch, loss, secs):
        r = evaluate(model, tokenizer, members, others, m, suffix_len)
        print(f"| {epoch} | {loss} | {secs} | {r['member']:.1f} | {r['other']:.1f} | {r['member'] - r['other']:+.1f} | "
              f"{r['best']:.1f} | {rate_ci(r['extractable'], r['n'])} | {rate_ci(r['verbatim'], r['n'])} | "
              f"{r['canaries'] or '–'} |", flush=True)

    show(0, "–", "–")
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        metrics = train_local(model, examples, cfg.train, seed=cfg.seed * 1_000_003 + epoch * 1_009,
                              pad_id=tokenizer.pad_token_id, epochs=1)
        secs = time.perf_counter() - t0
        if epoch % every == 0 or epoch == epochs:
            show(epoch, f"{metrics['train_loss']:.3f}", f"{secs:.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=12, help="epochs over the union of the clients' train splits")
    ap.add_argument("--every", type=int, default=3, help="evaluate every this many epochs")
    ap.add_argument("--variant", action="append", default=[], help="space-separated overrides on top")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    for variant in a.variant or [""]:
        run_variant([*a.overrides, *variant.split()], a.epochs, a.every)


if __name__ == "__main__":
    main()
