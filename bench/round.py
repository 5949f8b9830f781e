"""One complete audit round at the paper's sizes, against the same work done the way the reference pipeline does it.

    python bench/round.py                          # n = 4,000 prefixes per client, L = 3 clients, every method
    python bench/round.py --scaling                # also: MR alone at n in {500, 1000, 2000, 4000}, L in {3, 5, 10}
    python bench/round.py --n 4000 --skip-round --ref-prefixes 200 --dump-pairs pairs.json.gz   # only the checked pairs

The audited model is the tiny preset with a LoRA adapter trained once on the synthetic source (4,400 train samples
per client, so that 4,000 distinct ones are long enough to audit; one epoch over their union) and cached under
``<cache_dir>/bench-round/``. The scaling rows with other client counts audit the same adapter (the synthetic
public corpus, hence the base model, does not depend on the client count). The round is the real one:
``Auditor.evaluate`` with the default audit settings except ``audit.mr.n`` (and the audit pool that holds it), so
MR retrieves the top-10 of every client's index for every generation and types every retrieved pair with the
detector; PEARL and Prior-Aware audit their default sizes; the reports are written.

The reference-shaped pipeline is MR done as the seed paper's pipeline does it: one ``generate`` call per prompt,
one index query per (generation, client), one detector call per retrieved pair. It runs on a random subset of the
prefixes (``--ref-prefixes``) and is extrapolated to the round's counts; it is labelled so. The other methods and
the reports are counted at their measured time on both sides. The subset's per-pair detector verdicts must equal
the batch detector's on the same pairs.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import random
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from safetensors.torch import load_file, save_file

from fedmem.common.io import atomic_path
from fedmem.config.compose import compose_dict
from fedmem.config.experiment import from_dict
from fedmem.engine.generation import generate_batched
from fedmem.engine.model.load import adapter_state, load_adapter_state
from fedmem.engine.train import train_local
from fedmem.experiment.auditor import make_auditor
from fedmem.experiment.loading import fresh_lora_model
from fedmem.experiment.training import train_examples

TRAIN_PER_CLIENT = 4400  # >= 4,000 distinct samples long enough to audit (canaries repeat)


def bench_config(n: int, clients: int, methods: list[str], run_dir: str):
    overrides = [f"data.num_clients={clients}", f"data.train_per_client={max(TRAIN_PER_CLIENT, n)}",
                 f"audit.samples_per_client={n}", f"audit.mr.n={n}", f"audit.methods=[{','.join(methods)}]",
                 "train.progress=false"]
    return from_dict({**compose_dict(overrides), "run_dir": run_dir})


def trained_adapter(cfg) -> dict:
    """The bench's adapter: one epoch of the tiny preset over the union of the clients' train splits, cached."""
    # keyed by what shapes it: the data, the model and the optimizer settings (the epoch count is fixed here)
    key = json.dumps([cfg.part_hash("task", "data", "model"), cfg.seed, cfg.train.lr, cfg.train.batch_size,
                      cfg.train.effective_batch, cfg.train.weight_decay, cfg.train.max_grad_norm])
    path = Path(cfg.cache_dir) / "bench-round" / hashlib.sha256(key.encode()).hexdigest()[:12] / "adapter.safetensors"
    if path.is_file():
        return load_file(str(path))
    print(f"training the bench adapter once (cached at {path}) ...", flush=True)
    t = time.perf_counter()
    model, tokenizer = fresh_lora_model(cfg)
    examples, _ = train_examples(cfg, None)
    metrics = train_local(model, examples, cfg.train, seed=cfg.seed, pad_id=tokenizer.pad_token_id, epochs=1)
    state = adapter_state(model)
    with atomic_path(path) as tmp:
        save_file(state, str(tmp))
    print(f"  {len(examples)} examples, train loss {metrics['train_loss']:.3f}, {time.perf_counter() - t:.0f} s")
    return state


def audit_round(cfg, state: dict) -> tuple:
    """(the round report, its wall seconds, the set-up seconds, the auditor): one ``Auditor.evaluate``."""
    auditor = make_auditor(cfg, source={"kind": "bench"}, save_adapters=False)
    t = time.perf_counter()
    auditor.evaluate(1, state)
    seconds = time.perf_counter() - t
    report = json.loads((Path(cfg.run_dir) / "round_1" / "report.json").read_text())
    auditor.finish()
    return report, seconds, auditor.setup_seconds, auditor


def reference_shaped(auditor, k: int, seed: int) -> dict:
    """MR on ``k`` random prefixes the reference way: per prompt, per (generation, index), per pair."""
    mr, run = auditor.methods["mr"], auditor.run
    prefixes = [s for c in run.clients for s in mr.samples[c]]
    subset = random.Random(seed).sample(prefixes, min(k, len(prefixes)))
    model, tok = auditor.model, run.tokenizer
    t = time.perf_counter()
    gens = [tok.decode(generate_batched(model, tok, [s.prompt_ids], mr.cfg.max_new_tokens, decoding=run.decoding,
                                        seed=seed, batch_size=1)[0][0], skip_special_tokens=True) for s in subset]
    t_gen = time.perf_counter() - t
    t = time.perf_counter()
    pairs = []
    for g in gens:
        for c in run.clients:
            for doc, _ in mr.indexes[c].search([g], mr.cfg.top_k)[0]:
                pairs.append((g, mr.samples[c][doc].suffix_text))
    t_query = time.perf_counter() - t
    single = []
    t = time.perf_counter()
    for g, s in pairs:  # each call starts cold, as a per-pair pipeline does: nothing is reused from earlier pairs
        mr.detector.clear_caches()
        single.append(mr.detector.detect(g, s).category)
    t_det = time.perf_counter() - t
    batch = [d.category for d in mr.detector.detect_batch(pairs)]
    if single != batch:
        raise SystemExit(f"per-pair and batch detector verdicts differ on {sum(a != b for a, b in zip(single, batch))} "
                         f"of {len(pairs)} pairs")
    return {"prefixes": len(subset), "queries": len(subset) * len(run.clients), "pairs": pairs, "categories": single,
            "generation_s": t_gen, "query_s": t_query, "detector_s": t_det}


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def dump_pairs(path: str, pairs: list[tuple[str, str]], categories: list[str]) -> None:
    """The checked pairs and their verdicts as ``{"texts": [...], "pairs": [[generated, suffix, category]]}``
    (texts by index: a suffix recurs across generations): the fixture of ``tests/test_detector_round_pairs.py``."""
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    at = {t: i for i, t in enumerate(texts)}
    with gzip.open(path, "wt") as f:
        json.dump({"texts": texts, "pairs": [[at[g], at[s], c] for (g, s), c in zip(pairs, categories)]}, f)
    print(f"wrote {len(pairs)} pairs with their verdicts to {path}")


def record_pairs(args, state) -> None:
    """Only the reference subset's pairs and per-pair verdicts, written to ``--dump-pairs`` (no round)."""
    with tempfile.TemporaryDirectory() as tmp:
        auditor = make_auditor(bench_config(args.n, 3, ["mr"], tmp), save_adapters=False)
        load_adapter_state(auditor.model, state)
        ref = reference_shaped(auditor, args.ref_prefixes, auditor.cfg.seed)
        dump_pairs(args.dump_pairs, ref["pairs"], ref["categories"])


def paper_round(args, state) -> dict:
    methods = ["utility", "mr", "pearl", "pa"]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = bench_config(args.n, 3, methods, tmp)
        report, wall, setup, auditor = audit_round(cfg, state)
        mr = report["audit"]["mr"]
        L, n = len(mr["clients"]), args.n
        top_k = auditor.methods["mr"].cfg.top_k
        print(f"\npaper-scale round: L = {L} clients, n = {n} prefixes per client, top-{top_k} "
              f"per client index")
        print(f"  work: {n * L} generations of up to {auditor.methods['mr'].cfg.max_new_tokens} tokens, "
              f"{n * L * L} index queries, "
              f"{mr['pairs_checked']} detector pairs")
        print(f"  set-up (audit pool, {L} suffix indexes, detector models): {setup:.1f} s")
        print("  stage breakdown (s):")
        for stage, s in report["timings"]["mr_stages"].items():
            print(f"    mr/{stage:<24} {s:8.1f}")
        methods = {name: report["timings"][name] for name in auditor.methods}
        for name, s in methods.items():
            if name != "mr":
                print(f"    {name:<27} {s:8.1f}")
        other = sum(s for name, s in methods.items() if name != "mr")
        reports_s = wall - sum(methods.values())
        print(f"    {'reports':<27} {reports_s:8.1f}")
        print(f"  round wall time: {wall:.1f} s ({wall / 60:.1f} min); peak RSS {peak_rss_gb():.2f} GB")
        ref = reference_shaped(auditor, args.ref_prefixes, cfg.seed)
        if args.dump_pairs:
            dump_pairs(args.dump_pairs, ref["pairs"], ref["categories"])
        ref_total = (ref["generation_s"] / ref["prefixes"] * n * L + ref["query_s"] / ref["queries"] * n * L * L
                     + ref["detector_s"] / max(1, len(ref["pairs"])) * mr["pairs_checked"])
        ref_round = ref_total + other + reports_s
        print(f"  reference-shaped MR, extrapolated from {ref['prefixes']} random prefixes "
              f"({len(ref['pairs'])} pairs): "
              f"generation {ref['generation_s'] / ref['prefixes'] * n * L:.0f} s, queries "
              f"{ref['query_s'] / ref['queries'] * n * L * L:.0f} s, detector "
              f"{ref['detector_s'] / max(1, len(ref['pairs'])) * mr['pairs_checked']:.0f} s")
        print(f"  round: reference-shaped {ref_round:.0f} s (extrapolated) vs fedmem {wall:.0f} s: "
              f"{ref_round / wall:.1f}x (target >= 20x); MR alone {ref_total / report['timings']['mr']:.1f}x")
        print(f"  per-pair verdicts of the subset equal the batch detector's: yes ({len(ref['pairs'])} pairs)")
        return {(n, L): mr_row(report)}


def mr_row(report: dict) -> tuple:
    """(n, L, generation s, retrieval + detector s, MR s) of a round report."""
    mr = report["audit"]["mr"]
    sec = report["timings"]["mr_stages"]
    return (mr["n"][0], len(mr["clients"]), sec["generation"], sec["retrieval"] + sec["detector"],
            report["timings"]["mr"])


def scaling(args, state, measured: dict) -> None:
    """MR alone over the grid; ``measured``: rows already measured in this run (the paper-scale round's)."""
    rows = []
    grid = [(n, 3) for n in args.scale_n] + [(args.scale_n[0], L) for L in args.scale_L if L != 3]
    for n, L in grid:
        if (n, L) in measured:
            rows.append(measured[(n, L)])
            continue
        with tempfile.TemporaryDirectory() as tmp:
            report, _, _, _ = audit_round(bench_config(n, L, ["mr"], tmp), state)
            rows.append(mr_row(report))
        print(f"  n={n:5d} L={L:2d}: generation {rows[-1][2]:7.1f} s, retrieval + detector {rows[-1][3]:7.1f} s, "
              f"MR {rows[-1][4]:7.1f} s", flush=True)
    print("\nscaling of MR's time (one round; the n rows at L = 3, the L rows at the smallest n):")
    print("| n | L | generation s | retrieval + detector s | MR s |\n|---|---|---|---|---|")
    for n, L, g, rd, w in rows:
        print(f"| {n} | {L} | {g:.1f} | {rd:.1f} | {w:.1f} |")
    for label, col in (("generation", 2), ("retrieval + detector", 3), ("MR", 4)):
        n_rows = [r for r in rows if r[1] == 3]
        l_rows = [r for r in rows if r[0] == args.scale_n[0]]
        en = np.polyfit(np.log([r[0] for r in n_rows]), np.log([r[col] for r in n_rows]), 1)[0]
        el = (np.polyfit(np.log([r[1] for r in l_rows]), np.log([r[col] for r in l_rows]), 1)[0]
              if len(l_rows) > 1 else math.nan)
        print(f"  {label}: time ~ n^{en:.2f} L^{el:.2f}")
    print("  (bounds: generation no faster than L * n; retrieval and detection no faster than L^2 * n)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4000, help="prefixes per client (the paper: 4000)")
    ap.add_argument("--ref-prefixes", type=int, default=30, help="prefixes the reference-shaped pipeline runs")
    ap.add_argument("--scaling", action="store_true", help="also the scaling table (MR only)")
    ap.add_argument("--scale-n", type=int, nargs="+", default=[500, 1000, 2000, 4000])
    ap.add_argument("--scale-L", type=int, nargs="+", default=[3, 5, 10])
    ap.add_argument("--skip-round", action="store_true", help="only the scaling table")
    ap.add_argument("--dump-pairs", help="write the reference subset's pairs and verdicts (json.gz); with "
                    "--skip-round, only that")
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    with tempfile.TemporaryDirectory() as tmp:
        state = trained_adapter(bench_config(TRAIN_PER_CLIENT, 3, ["mr"], tmp))
    measured = {}
    if args.dump_pairs and args.skip_round:
        record_pairs(args, state)
    elif not args.skip_round:
        measured = paper_round(args, state)
    if args.scaling:
        scaling(args, state, measured)


if __name__ == "__main__":
    main()
