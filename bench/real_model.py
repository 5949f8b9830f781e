"""Bench: one real pretrained model's work per stage on this machine, each beside the machine's own matmul rate.

SmolLM2-135M-Instruct (the smollm2-135m preset, read from its GGUF file and cached) does what a round does with it:
LoRA training steps (``fedmem.engine.train.train_local``), batched KV-cached generation (``fedmem.engine.generation``) and
teacher-forced scoring (``fedmem.engine.scoring.sequence_logprobs``), and MR's generation to the end of the turn both ways:
transformers' ``generate`` on one fixed batch of the peft model, and fedmem's decoding loop on the merged copy the
audit uses. Each stage's rate is given in tokens per second and
as model FLOP/s (2 x parameters per token forward; 4 x for a LoRA training token, whose backward pass computes
activation gradients through the frozen base but no weight gradients for it), next to the float32 rate of a plain
``torch.mm`` of the model's own projection shapes measured in the same run: the physical limit each stage is
compared with.

A decoding step multiplies only as many rows as there are sequences in flight, and ``torch.mm`` is slower on few
rows than on the training batch's thousand. So the generation's own ceiling is measured too: ``torch.mm`` over one
decoding step's products (every projection of every layer and the output head) at the loop's rows in flight and
at its mean rows, and a profile of the loop (its time per kind of operation, and the time spent outside any
operation: Python).

    python bench/real_model.py                     # 2 threads, batch 8 x 128 tokens training, 128 prompts
    python bench/real_model.py --threads 1 --prompts 32
"""

from __future__ import annotations

import argparse
import time

import torch
from references import english_passages

from fedmem.config.compose import compose_dict
from fedmem.engine.config import Decoding, ModelConfig, TrainConfig
from fedmem.engine.generation import auto_rows, generate_batched
from fedmem.engine.model.load import load_base, merged_copy, wrap_lora
from fedmem.engine.scoring import sequence_logprobs
from fedmem.engine.train import train_local


def matmul_rate(tokens: int, shapes: list[tuple[int, int]], repeats: int = 5) -> float:
    """float32 FLOP/s of ``torch.mm`` over ``[tokens, k] @ [k, n]`` for the model's projection shapes."""
    return step_rate(tokens, [(k, n, 1) for k, n in shapes], repeats)[0]


def step_shapes(c) -> list[tuple[int, int, int]]:
    """One forward step's products per token as (k, n, count): every layer's projections, then the output head."""
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv = (getattr(c, "num_key_value_heads", None) or c.num_attention_heads) * head_dim
    h, i, layers = c.hidden_size, c.intermediate_size, c.num_hidden_layers
    return [(h, h, 2 * layers), (h, kv, 2 * layers), (h, i, 2 * layers), (i, h, layers), (h, c.vocab_size, 1)]


def step_rate(rows: int, shapes: list[tuple[int, int, int]], repeats: int = 5) -> tuple[float, float]:
    """``torch.mm`` on one decoding step's products at ``rows`` rows: (its FLOP/s, the tokens/s it would allow)."""
    flops, seconds = 0.0, 0.0
    for k, n, count in shapes:
        a, b = torch.randn(rows, k), torch.randn(k, n)
        torch.mm(a, b)  # warm-up
        t = time.perf_counter()
        for _ in range(repeats):
            torch.mm(a, b)
        seconds += (time.perf_counter() - t) * count
        flops += 2.0 * rows * k * n * count * repeats
    return flops / seconds, rows * repeats / seconds


# The profile's kinds of operation, by the name of the aten op that spends the time (the first match counts).
KINDS = (("matrix products", ("mm", "addmm", "bmm", "matmul", "linear")),
         ("attention", ("scaled_dot_product", "_flash_attention")),
         ("sampling", ("topk", "sort", "multinomial", "softmax", "cumsum", "exponential", "argmax", "div", "log")),
         ("cache and row moves", ("copy_", "index", "cat", "slice_scatter", "narrow", "clone", "where", "masked")))


def profile_loop(model, tok, prompts, new: int, rows: int) -> tuple[float, dict[str, float]]:
    """Wall seconds of one run of fedmem's decoding loop under the profiler, and its share per kind of operation
    (self CPU time of the aten ops of each kind; 'outside any op' is the wall time no op accounts for)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        generate_batched(model, tok, prompts, new, decoding=Decoding(strategy="top_k"), seed=0, batch_size=rows)
        wall = time.perf_counter() - t
    spent: dict[str, float] = {kind: 0.0 for kind, _ in KINDS} | {"other ops": 0.0}
    for ev in prof.key_averages():
        if not ev.key.startswith("aten::"):
            continue
        op = ev.key[len("aten::"):]
        kind = next((k for k, names in KINDS if any(op == n or op.startswith(n) or n in op for n in names)),
                    "other ops")
        spent[kind] += ev.self_cpu_time_total / 1e6
    spent["outside any op (Python, dispatch)"] = max(0.0, wall - sum(spent.values()))
    return wall, {k: v / wall for k, v in spent.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8, help="training sequences per step")
    ap.add_argument("--seq", type=int, default=128, help="training and scoring sequence length (tokens)")
    ap.add_argument("--steps", type=int, default=3, help="timed training steps (after one warm-up step)")
    ap.add_argument("--prompts", type=int, default=128, help="generation prompts (30-token prefixes of passages)")
    ap.add_argument("--new", type=int, default=256, help="the generation cap (MR's default)")
    ap.add_argument("--profile-new", type=int, default=32, help="new tokens of the profiled generation")
    ap.add_argument("--cache-dir", default=".cache/fedmem")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    preset = compose_dict(["model=smollm2-135m"])["model"]
    cfg = ModelConfig(**preset)
    t = time.perf_counter()
    base, tok, where = load_base(cfg, [], seed=0, cache_dir=args.cache_dir, progress=False)
    load_s = time.perf_counter() - t
    params = sum(p.numel() for p in base.parameters())
    c = base.config
    shapes = [(c.hidden_size, c.hidden_size), (c.hidden_size, c.intermediate_size),
              (c.intermediate_size, c.hidden_size)]
    peak = matmul_rate(args.batch * args.seq, shapes)
    print(f"model: {where}; {params / 1e6:.1f} M parameters; loaded in {load_s:.1f} s; torch threads "
          f"{torch.get_num_threads()}")
    print(f"torch.mm float32 over the model's projection shapes ({args.batch * args.seq} rows): "
          f"{peak / 1e9:.1f} GFLOP/s (the limit below)\n")

    words = [w for p in english_passages(400, 400) for w in p.split()]
    ids = tok(" ".join(words), add_special_tokens=False)["input_ids"]
    need = args.seq * args.batch * (args.steps + 1)
    if len(ids) < need:
        raise SystemExit("needs the dependencies' licence texts (bench/references.py) for its English text")
    seqs = [ids[i : i + args.seq] for i in range(0, need, args.seq)]

    rows = []
    model = wrap_lora(base, cfg)
    train_cfg = TrainConfig(lr=1e-3, batch_size=args.batch, effective_batch=args.batch, progress=False)
    train_local(model, seqs[: args.batch], train_cfg, seed=0, pad_id=tok.pad_token_id)  # warm-up step
    t = time.perf_counter()
    train_local(model, seqs[args.batch :], train_cfg, seed=0, pad_id=tok.pad_token_id)
    s = time.perf_counter() - t
    rows.append(("LoRA training (forward + backward, AdamW)", args.batch * args.seq * args.steps, s, 4))

    pairs = [(tuple(q[:30]), tuple(q[30:])) for q in seqs]
    t = time.perf_counter()
    sequence_logprobs(model, pairs, batch_size=32)
    s = time.perf_counter() - t
    rows.append(("scoring log P(s|p) (teacher-forced, batch 32)", sum(len(p) + len(q) for p, q in pairs), s, 2))

    # MR's prompts: a text's first 30 tokens in the chat template's open user turn, continued to the end of the turn
    header = tok.apply_chat_template([{"role": "user", "content": "X"}], tokenize=False).split("X")[0]
    head = tuple(tok(header, add_special_tokens=False)["input_ids"])
    passages = english_passages(words_per_passage=36, stride=36)[: args.prompts]
    prompts = [head + tuple(tok(p, add_special_tokens=False)["input_ids"][:30]) for p in passages]
    sides = {"generate (one batch of all prompts, peft model)": (model, "transformers", len(prompts)),
             "fedmem's decoding loop (merged copy)": (merged_copy(model), "fedmem", None)}
    for name, (m, backend, rows_in_flight) in sides.items():
        t = time.perf_counter()
        outs = generate_batched(m, tok, prompts, args.new, decoding=Decoding(strategy="top_k"), seed=0,
                                batch_size=rows_in_flight, backend=backend)
        s = time.perf_counter() - t
        made = sum(len(o[0]) for o in outs)
        ended = sum(len(o[0]) < args.new for o in outs)
        rows.append((f"generation to the end of the turn, {name}: {ended} of {len(prompts)} ended", made, s, 2))
    merged = sides["fedmem's decoding loop (merged copy)"][0]
    loop_rate = made / s  # the last side is fedmem's loop
    in_flight = min(len(prompts), auto_rows(merged, max(map(len, prompts)) + args.new))
    # tokens over steps, where every prompt is in flight from the first step (one wave): a row makes a token a step
    mean_rows = made / max(len(o[0]) for o in outs) if len(prompts) <= in_flight else None

    print("| stage | tokens | seconds | tokens/s | model GFLOP/s | share of torch.mm |")
    print("|---|---|---|---|---|---|")
    for name, tokens, seconds, factor in rows:
        rate = factor * params * tokens / seconds
        print(f"| {name} | {tokens} | {seconds:.1f} | {tokens / seconds:.0f} | {rate / 1e9:.1f} | "
              f"{rate / peak:.2f} |")

    mean = f", {mean_rows:.1f} on the mean step (the rest have ended)" if mean_rows else ""
    print(f"\nThe decoding loop's own ceiling: {in_flight} rows in flight at most{mean}")
    print("| torch.mm over one decoding step's products | rows | GFLOP/s | share of the training-shape rate | "
          "tokens/s it allows | the loop's tokens/s as a share of it |")
    print("|---|---|---|---|---|---|")
    at = [("at the loop's rows in flight", in_flight)] + ([("at its mean rows", round(mean_rows))] if mean_rows else [])
    for label, r in at:
        flops, tokens_s = step_rate(max(1, r), step_shapes(c))
        print(f"| {label} | {r} | {flops / 1e9:.1f} | {flops / peak:.2f} | {tokens_s:.0f} | "
              f"{loop_rate / tokens_s:.2f} |")

    wall, shares = profile_loop(merged, tok, prompts[:in_flight], args.profile_new, in_flight)
    print(f"\nProfile of the loop ({in_flight} prompts, {args.profile_new} new tokens, {wall:.1f} s under the "
          "profiler): share of wall time")
    print("| kind of operation | share |")
    print("|---|---|")
    for kind, share in shares.items():
        print(f"| {kind} | {share:.2f} |")


if __name__ == "__main__":
    main()
