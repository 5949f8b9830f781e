"""The synthetic source's data floor: how often a *fresh* text of a client (a held-out record, never trained on)
already matches training suffixes under MR's retrieval and detector, with no model involved.

    python bench/synthetic_floor.py [--seed 0] [--clients 3] [--train 600] [--test 600]

Per client j, its held-out records' memorization texts are split as the audit splits them (``build_audit_pool``:
the first 30 tokens of the tiny preset's tokenizer, trained on the public corpus, are the prefix); the true
continuation goes through MR's matching step (``fedmem.audit.mr.suffix_match``: top-10 BM25 over each client's
``--train`` training suffixes, drawn as the audit draws them, and the PAN2014 detector), as if a model had generated
it. Own-client floor: the share of j's held-out texts with a hit in j's index (MR_Intra's figure); other-client
floor: the share with a hit in another client's index, averaged over the other clients (MR_Inter's). Ordinary and
boilerplate records are counted apart (a boilerplate text matches every client, as its ``generic`` tag says);
canaries are never held out. 95% Wilson intervals at the effective sample size, as MR reports them.
"""

from __future__ import annotations

import argparse
import time


def audit_split(fd, seed: int, train: int, test: int) -> tuple[dict[int, list[str]], list[tuple[int, str, bool]]]:
    """Each client's training suffixes (``train`` records, drawn as the audit draws them) and the held-out texts
    (up to ``test`` per client) as (client, true continuation, ends in boilerplate)."""
    from fedmem.audit.config import AuditConfig
    from fedmem.audit.pool import build_audit_pool
    from fedmem.data import TaskConfig
    from fedmem.engine.model.tiny import train_tokenizer

    tok = train_tokenizer(fd.public_corpus, 2048)  # the tiny preset's tokenizer (vocab_size 2048)
    run = build_audit_pool(AuditConfig(samples_per_client=train, test_per_client=test), TaskConfig(name="dialog"),
                          fd, tok, seed)
    suffixes = {c: [s.suffix_text for s in run.train[c][:train]] for c in run.train}
    held = [(c, s.suffix_text, bool(s.tags.get("generic"))) for c in run.test for s in run.test[c]]
    return suffixes, held


def floor_figures(suffixes: dict[int, list[str]], held: list[tuple[int, str, bool]], sizes: dict[int, int]) -> dict:
    """``{"ordinary": ..., "boilerplate": ...}``: MR's figures (``suffix_match.data_floor``, hits of any category)
    over each kind of held-out text, with its number of texts."""
    from fedmem.audit.mr.detector import DetectorConfig, PlagiarismDetector
    from fedmem.audit.mr.suffix_match import SuffixMatcher, data_floor

    matcher = SuffixMatcher(suffixes, PlagiarismDetector(DetectorConfig()))
    try:
        out = {}
        for kind, generic in (("ordinary", False), ("boilerplate", True)):
            rows = [(c, text) for c, text, g in held if g == generic]
            floor = data_floor(matcher, [c for c, _ in rows], [text for _, text in rows], sizes)
            out[kind] = {**floor["all"]["any"], "texts": floor["texts"]}
        return out
    finally:
        matcher.close()


def _fmt(rate: float | None, ci: list[float] | None) -> str:
    if rate is None:
        return "n/a"
    return f"{100 * rate:6.2f}% (95% CI {100 * ci[0]:.2f}-{100 * ci[1]:.2f}%)" if ci else f"{100 * rate:6.2f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--train", type=int, default=600, help="training suffixes per client (MR's audit.mr.n)")
    ap.add_argument("--test", type=int, default=600, help="held-out texts per client (the source's test split)")
    args = ap.parse_args()

    from fedmem.data import DataConfig, TaskConfig, load_federated

    t0 = time.perf_counter()
    fd = load_federated(TaskConfig(name="dialog"), DataConfig(num_clients=args.clients, test_per_client=args.test),
                        seed=args.seed)
    t1 = time.perf_counter()
    suffixes, held = audit_split(fd, args.seed, args.train, args.test)
    sizes = {c: len(split.train) for c, split in enumerate(fd.clients)}
    figures = floor_figures(suffixes, held, sizes)
    t2 = time.perf_counter()
    print(f"synthetic floor: seed {args.seed}, {args.clients} clients, {args.train} training suffixes and "
          f"{args.test} held-out texts per client, prefix = 30 tokens of the tiny tokenizer")
    for kind, f in figures.items():
        print(f"  {kind:11s} texts={f['texts']:5d}  own {_fmt(f['intra'], f['intra_ci95'])}  "
              f"other {_fmt(f['inter'], f['inter_ci95'])}")
    print(f"  time: data {t1 - t0:.1f}s, split + retrieval + detector {t2 - t1:.1f}s")


if __name__ == "__main__":
    main()
