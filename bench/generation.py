"""Batched generation vs one prompt at a time on a tiny-preset-sized model (target >= 8x), same run.

    python bench/generation.py [--prompts 128] [--new 64] [--batch 64]

Both sides call ``generate_batched`` (HF generate with a KV cache, top-k 40 sampling); the baseline with one
prompt per call. Every continuation runs the full budget (no early stop) so both do the same token work.
"""

from __future__ import annotations

import argparse
import time

import torch

from fedmem.config import Decoding
from fedmem.generation import generate_batched
from fedmem.model.tiny import qwen2_model


class _Tok:  # ids only: no tokenizer work is being measured; the eos id never occurs (vocab - 1 is masked)
    pad_token_id = 0
    eos_token_id = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    model = qwen2_model(2048, 128, 384, 4, 4, 2, seed=0, max_position_embeddings=512).eval()
    g = torch.Generator().manual_seed(1)
    prompts = [tuple(torch.randint(1, 2000, (int(torch.randint(30, 50, (1,), generator=g)),), generator=g).tolist())
               for _ in range(args.prompts)]
    dec = Decoding("top_k")
    t = time.perf_counter()
    batched = generate_batched(model, _Tok(), prompts, args.new, decoding=dec, seed=0, batch_size=args.batch)
    tb = time.perf_counter() - t
    t = time.perf_counter()
    single = [generate_batched(model, _Tok(), [p], args.new, decoding=dec, seed=0, batch_size=1)[0] for p in prompts]
    ts = time.perf_counter() - t
    toks = sum(len(o[0]) for o in batched)
    assert toks == sum(len(o[0]) for o in single) == args.prompts * args.new
    print(f"{args.prompts} prompts x {args.new} new tokens, tiny preset size (hidden 128, 4 layers, vocab 2048)")
    print(f"batched ({args.batch}/batch): {tb:.2f} s ({toks / tb:.0f} tok/s); one at a time: {ts:.2f} s ({toks / ts:.0f} tok/s)")
    print(f"speedup batched / one-at-a-time: {ts / tb:.1f}x (target >= 8x)")


if __name__ == "__main__":
    main()
