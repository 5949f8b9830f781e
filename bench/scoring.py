"""Bench: scored suffix tokens per second for Prior-Aware's P̂(s) (every prior prefix q_i x every suffix s).

Three ways, same model, same data, same process:
  engine  fedmem.engine.scoring.prior_logprobs (prefix KV cache computed once, expanded over suffix blocks)
  naive   a Python loop of one forward pass per (q_i, s) pair (timed on a subset, reported as a rate)
  pairs   (--with-pairs) fedmem.engine.scoring.sequence_logprobs on all (q_i, s) pairs: batched, no cache reuse
The results are checked against each other; the printed ratio engine / naive is the target (>= 5x).

    python bench/scoring.py                    # the tiny preset's Qwen2 sizes: hidden 128, 4 layers, vocab 2048
    python bench/scoring.py --threads 1 --with-pairs      # one thread; also the batched no-reuse reference
    python bench/scoring.py --suffix-len 8                # the paper's short-suffix regime

On a CPU the gain is about (|q| + |s|) / |s| (prefix reuse) times the batching gain. At the tiny preset's sizes
a full-length forward with a batch of one is already fairly efficient in sgemm, so the batching gain is modest
and the ceiling at 64-token suffixes (prefix 30) stays well below the target; at 8-token suffixes the prefix
reuse alone is worth much more. The gain grows as suffixes get shorter than prefixes and on accelerators, where
one small forward per pair is latency-bound.
On a shared machine the multi-threaded naive loop degrades much more under load than the engine and the ratio
inflates; compare runs made in quiet conditions (see `uptime`), and --threads 1 for the compute-only ratio.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from fedmem.engine.model.tiny import qwen2_model
from fedmem.engine.scoring import prior_logprobs, sequence_logprobs


def build_model(vocab: int, hidden: int, intermediate: int, layers: int, seed: int):
    return qwen2_model(vocab, hidden, intermediate, layers, 4, 2, seed=seed, max_position_embeddings=512,
                       pad_token_id=0).eval()


@torch.inference_mode()
def naive(model, pairs) -> np.ndarray:
    """One unbatched forward per (q, s) pair, no cache: the baseline."""
    device = next(model.parameters()).device
    out = []
    for q, s in pairs:
        ids = torch.tensor([list(q) + list(s)], device=device)
        logp = torch.log_softmax(model(input_ids=ids).logits[0, len(q) - 1 : -1].float(), dim=-1)
        out.append(float(logp.gather(-1, torch.tensor(s, device=device).unsqueeze(-1)).sum()))
    return np.array(out)


def timed(fn, *args, **kw):
    t = time.perf_counter()
    out = fn(*args, **kw)  # both return numpy arrays: any accelerator work has finished
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--c", type=int, default=64, help="prior prefixes")
    ap.add_argument("--suffixes", type=int, default=64, help="audited suffixes")
    ap.add_argument("--prefix-len", type=int, default=30)
    ap.add_argument("--suffix-len", default="64,8", help="suffix length(s), comma-separated: one bench per length")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--intermediate", type=int, default=384)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64, help="rows per forward pass (engine and pairs)")
    ap.add_argument("--naive-pairs", type=int, default=512, help="pairs timed for the naive loop (a rate)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave torch's default)")
    ap.add_argument("--device", default="cpu", help="cpu, or an accelerator such as cuda")
    ap.add_argument("--with-pairs", action="store_true", help="also time batched sequence_logprobs (no reuse)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)

    model = build_model(a.vocab, a.hidden, a.intermediate, a.layers, seed=0).to(a.device)
    print(f"model: Qwen2 hidden {a.hidden}, {a.layers} layers, vocab {a.vocab}; torch threads {torch.get_num_threads()}, "
          f"device {a.device}")
    ratios = {}
    for suffix_len in [int(x) for x in str(a.suffix_len).split(",")]:
        ratios[suffix_len] = bench(model, a, suffix_len)
    print("summary: " + ", ".join(f"{n}-token suffixes {r:.1f}x" for n, r in ratios.items()) + "  (target >= 5x)")


def bench(model, a, suffix_len: int) -> float:
    """One engine-vs-naive comparison at one suffix length; returns the ratio engine / naive."""
    rng = np.random.default_rng(0)
    prefixes = [tuple(rng.integers(1, a.vocab, a.prefix_len).tolist()) for _ in range(a.c)]
    suffixes = [tuple(rng.integers(1, a.vocab, suffix_len).tolist()) for _ in range(a.suffixes)]
    tokens = a.c * a.suffixes * suffix_len
    print(f"\nP̂(s): {a.c} prefixes x {a.suffixes} suffixes, {a.prefix_len}+{suffix_len} tokens, "
          f"{tokens} scored suffix tokens; batch {a.batch_size}")

    prior_logprobs(model, prefixes[:2], suffixes[:2], batch_size=4)  # warm-up (lazy init, allocator)
    naive(model, [(prefixes[0], suffixes[0])])
    # Interleaved: the machine is shared, so engine and naive are timed in alternating slices of the same
    # minutes rather than one after the other (load drifts would otherwise bias the ratio either way).
    blocks = max(1, min(a.c, a.naive_pairs // max(1, min(a.suffixes, a.naive_pairs))))
    per_block = -(-a.c // blocks)
    naive_per_block = max(1, a.naive_pairs // blocks)
    eng = np.zeros((a.c, a.suffixes))
    t_eng = t_nv = 0.0
    nv_rows, nv_pairs = [], []
    for b in range(0, a.c, per_block):
        q = prefixes[b : b + per_block]
        eng[b : b + len(q)], dt = timed(prior_logprobs, model, q, suffixes, batch_size=a.batch_size)
        t_eng += dt
        sub = [(b, j) for j in range(a.suffixes)][:naive_per_block]
        out, dt = timed(naive, model, [(prefixes[i], suffixes[j]) for i, j in sub])
        t_nv += dt
        nv_rows.append(out)
        nv_pairs += sub
    rate_eng = tokens / t_eng
    print(f"engine  prior_logprobs      {t_eng:8.2f} s  {rate_eng:10.0f} suffix tok/s")
    nv = np.concatenate(nv_rows)
    k = len(nv_pairs)
    rate_nv = k * suffix_len / t_nv
    diff = np.abs(nv - np.array([eng[i, j] for i, j in nv_pairs])).max()
    print(f"naive   1 forward per pair  {t_nv:8.2f} s  {rate_nv:10.0f} suffix tok/s   ({k} pairs timed; "
          f"max |diff| vs engine {diff:.1e})")

    if a.with_pairs:
        pairs_all = [(q, s) for q in prefixes for s in suffixes]
        seq, t_seq = timed(sequence_logprobs, model, pairs_all, batch_size=a.batch_size)
        print(f"pairs   sequence_logprobs   {t_seq:8.2f} s  {tokens / t_seq:10.0f} suffix tok/s   "
              f"(batched, no cache reuse; max |diff| vs engine {np.abs(seq.reshape(eng.shape) - eng).max():.1e})")
    print(f"speed-up engine / naive: {rate_eng / rate_nv:.1f}x  (target >= 5x)")
    if diff > 1e-3:
        raise SystemExit(f"engine and naive disagree by {diff}")
    return rate_eng / rate_nv

if __name__ == "__main__":
    main()
