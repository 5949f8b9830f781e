"""The MR method end to end on real parts: tiny Qwen2 + tokenizer, the embedded BM25 index, the PAN2014 detector.

Generations are fixed by pre-filling the round's generation cache for the exact request the method makes, so the
outcome is known: one prefix of client 0 "generates" a verbatim copy of a client-0 suffix inside other text, one
generation is incoherent, the rest are unrelated. Everything downstream (index, detector, figures) is real. Each
client's pool holds one planted canary (make_run's sample 0) beside its three ordinary samples.
"""

import gzip
import json

import pytest
from helpers import make_run, tiny_model, tiny_tokenizer

from fedmem.audit.base import AuditedModel
from fedmem.audit.mr import MemorizationRatio, MRConfig
from fedmem.reports.views import view_for


@pytest.fixture(scope="module")
def parts():
    tok = tiny_tokenizer()
    run = make_run(tok, n_clients=2, n_train=4, n_test=3, prefix_len=8, suffix_len=40)
    return tok, tiny_model(tok), run


UNRELATED = "Completely different words about weather and trains today."


def audit_with_generations(method, run, model, tok, texts, out_dir, heldout_texts=None, canary_texts=None):
    """Run the method with the round's generation pass pre-filled: ordinary training prefix i "generates"
    ``texts[i]``, the control's held-out prefix i ``heldout_texts[i]`` and canary i ``canary_texts[i]`` (unrelated
    text unless given)."""
    prefixes = [s for c in run.clients for s in method.samples[c]]
    held = [s for c in run.clients for s in method.heldout.get(c, [])]
    texts = (list(texts) + list(canary_texts or [UNRELATED] * len(method.canaries))
             + list(heldout_texts or [UNRELATED] * len(held)))
    audited = AuditedModel(pool=run, round=1, model=model, out_dir=str(out_dir))
    key = (tuple(s.prompt_ids for s in prefixes + method.canaries + held), method.cfg.max_new_tokens, 1,
           run.decoding, run.seed + 1000)
    audited._gen_cache[key] = [[tok(t, add_special_tokens=False)["input_ids"]] for t in texts]
    return method.audit(audited)


def test_mr_exact_outcome(parts, tmp_path):
    tok, model, run = parts
    method = MemorizationRatio(MRConfig(n=3, heldout=1), run)
    prefixes = [s for c in run.clients for s in method.samples[c]]
    assert [s.id for s in prefixes] == [s.id for c in run.clients for s in run.train[c][1:]]  # the canaries apart
    target = method.samples[0][1].suffix_text  # the suffix of client 0's second ordinary sample
    texts = [UNRELATED] * len(prefixes)
    texts[0] = "Well, as I said: " + target + " And that was all."  # copies a client-0 suffix verbatim
    texts[4] = "the same thing " * 12  # incoherent: a 3-gram repeated >= 10 times
    sec = audit_with_generations(method, run, model, tok, texts, tmp_path)
    assert len(target) >= 60
    assert sec["matrix"]["verbatim"] == [[pytest.approx(1 / 3), 0.0], [0.0, 0.0]]
    assert sec["matrix"]["any"] == sec["matrix"]["verbatim"]
    w0 = run.train_sizes[0] / sum(run.train_sizes.values())
    assert sec["intra"]["any"] == pytest.approx(w0 / 3)
    assert sec["inter"]["any"] == 0.0
    assert sec["total"]["any"] == pytest.approx(1 / 6) and sec["setting"] == "fl"  # union over all 6 prefixes
    assert "Lucene 9" in sec["reference"]["retrieval"] and "per sentence pair" in sec["reference"]["detector"]
    assert sec["incoherent_dropped"] == [0, 1]  # per client, in the order of sec["clients"]
    assert sec["headline"]["total"] == pytest.approx(1 / 6)
    assert sec["headline"]["intra_minus_inter"] == pytest.approx(w0 / 3)  # what a sweep table averages
    stages = sec["seconds"]  # stage timings, which the auditor moves out of the section into the report's timings
    assert {"generation", "retrieval", "detector", "detector_seeding"} <= set(stages)
    assert all(v >= 0 for v in stages.values())
    with gzip.open(tmp_path / "mr_records.jsonl.gz", "rt") as f:
        recs = [json.loads(line) for line in f]
    assert [r["split"] for r in recs].count("test") == 2  # the control's held-out prefixes, one per client
    assert sum(r["canary"] for r in recs) == 2  # each client's canary, typed against its own record only
    recs = [r for r in recs if r["split"] == "train" and not r["canary"]]
    assert len(recs) == 5  # the incoherent generation is dropped
    hit = [r for r in recs if r["matches"]]
    assert len(hit) == 1 and hit[0]["prefix"] == prefixes[0].id
    match = next(m for m in hit[0]["matches"] if m["suffix"] == method.samples[0][1].id)
    assert match["client"] == 0 and match["category"] == "verbatim" and match["spans"]
    g0, g1, s0, s1 = match["spans"][0]  # the aligned passages: the copied suffix inside the generation
    assert texts[0][g0:g1].split() == target[s0:s1].split() and s1 - s0 > len(target) // 2
    assert "generation" not in hit[0] and "suffix_text" not in match  # no text without audit.reveal_text
    assert sec["examples"] == []
    # the control: the held-out prefixes generated unrelated text, so the excess is the paper's MR itself
    control, h = sec["control"], sec["headline"]
    assert control["heldout_n"] == [1, 1] and control["combined"]["all"]["heldout"]["any"]["total"] == 0.0
    assert h["excess_total"] == pytest.approx(1 / 6) and h["excess_intra"] == pytest.approx(w0 / 3)
    assert h["excess_total_ci95"][0] < 1 / 6 < h["excess_total_ci95"][1]
    assert h["excess_inter"] == 0.0 and h["heldout_total"] == 0.0
    assert not match["shared"] and h["distinctive_excess_total"] == pytest.approx(1 / 6)
    # the copied suffix is another record's: an other-record hit; the fixture's sentences come from one small grammar,
    # so the detector also types the generation a paraphrase of prefix 0's own continuation, as the paper's MR did
    assert h["excess_other_intra"] == pytest.approx(w0 / 3) and h["excess_own_intra"] == pytest.approx(w0 / 3)
    pngs = view_for(method).render(sec, str(tmp_path))
    assert [f for _, f in pngs] == ["mr_heatmaps.png"] and (tmp_path / "mr_heatmaps.png").stat().st_size > 0
    md = view_for(method).markdown(sec)
    assert "MR(j→k)" in md and "MR_TotalFL |" in md
    assert "Incoherent generations dropped: 1 (0: 0, 1: 1)" in md
    assert f"MR_Intra − MR_Inter (any): {100 * w0 / 3:+.2f} pts [" in md  # client 0 hits itself once, nobody else


def test_revealed_text_reaches_records_and_examples(parts, tmp_path):
    import dataclasses

    tok, model, run = parts
    run = dataclasses.replace(run, reveal_text=True)
    method = MemorizationRatio(MRConfig(n=3, examples_per_pair=1), run)
    target = run.train[1][2].suffix_text
    texts = ["Completely different words about weather and trains today."] * 6
    texts[0] = texts[1] = "Well: " + target  # two prefixes of client 0 copy a client-1 suffix
    sec = audit_with_generations(method, run, model, tok, texts, tmp_path)
    assert sec["matrix"]["verbatim"][0] == [0.0, pytest.approx(2 / 3)]
    # one example per category and client pair: the second copy of the same pair is left out
    keys = [(e["category"], e["prefix_client"], e["suffix_client"]) for e in sec["examples"]]
    assert ("verbatim", 0, 1) in keys and len(keys) == len(set(keys))
    e = sec["examples"][keys.index(("verbatim", 0, 1))]
    assert e["generation"] == texts[0] and e["suffix"] == target and e["prefix"] == method.samples[0][0].prefix_text
    with gzip.open(tmp_path / "mr_records.jsonl.gz", "rt") as f:
        rec = json.loads(f.readline())
    assert rec["generation"] == texts[0] and rec["prefix_text"] == method.samples[0][0].prefix_text
    assert target in [m["suffix_text"] for m in rec["matches"]]
    g0, g1, _, _ = e["spans"][0]
    md = view_for(method).markdown(sec)
    assert "| verbatim | 0 → 1 |" in md and f"**{texts[0][g0:g1].strip()}**" in md  # the matched passage in bold


def test_cl_label_reports_total_cl(parts, tmp_path):
    tok, model, run = parts
    method = MemorizationRatio(MRConfig(n=2), run)
    audited = AuditedModel(pool=run, round=0, model=model, label="cl")
    sec = method.audit(audited)  # real generation by the untrained tiny model
    assert sec["setting"] == "cl" and set(sec["total"]) == set(sec["intra"])  # same keys in FL and CL reports
    assert "MR_TotalCL |" in view_for(method).markdown(sec)
    assert all(0.0 <= v <= 1.0 for row in sec["matrix"]["any"] for v in row)
    assert sum(sec["n"]) == 4


def test_config_validation():
    with pytest.raises(ValueError, match="audit.mr.n"):
        MRConfig(n=0)
    with pytest.raises(ValueError, match="backend"):
        MRConfig(index={"backend": "solr"})


def test_ground_truth_counts_leaked_secret_parts(parts, tmp_path):
    import dataclasses

    tok, model, _ = parts
    run = make_run(tok, n_clients=2, n_train=4, n_test=1, prefix_len=8, suffix_len=40)
    tag = lambda s, cid, copies: dataclasses.replace(s, tags={"canary": cid, "copies": copies})  # noqa: E731
    run.train[0][0] = tag(run.train[0][0], "canary-000", 4)
    run.train[0][1] = tag(run.train[0][1], "canary-001", 1)
    run.ground_truth = {"canaries": [
        {"id": "canary-000", "secret_parts": {"name": "Ada Quill", "record_number": "12345", "phone": "555 1123"}},
        {"id": "canary-001", "secret_parts": {"name": "Bo Rune", "record_number": "23456", "phone": "555 2234"}},
    ]}
    method = MemorizationRatio(MRConfig(n=2), run)
    assert [s.tags["canary"] for s in method.canaries] == ["canary-000", "canary-001", "k10"]
    texts = [UNRELATED] * 4  # 2 clients x 2 ordinary prefixes
    canary_texts = ["my record number is 12345 and that is all",  # a secret part of canary-000: leaked
                    "my name is Bo Rune",  # the name alone is not counted (names come from a small pool)
                    "Well, as I said: " + method.canaries[2].suffix_text]  # k10 reproduces its own record
    sec = audit_with_generations(method, run, model, tok, texts, tmp_path, canary_texts=canary_texts)
    gt = sec["ground_truth"]["canary_by_copies"]
    # make_run tags each client's first sample as a 4-copy canary: client 1's has no secret in the truth
    assert gt["4"] == {"n": 2, "verbatim": 1, "any": 1, "secret_leaked": 1, "incoherent": 0}
    assert gt["1"] == {"n": 1, "verbatim": 0, "any": 0, "secret_leaked": 0, "incoherent": 0}
    # canaries enter no ordinary rate: only the ordinary prefixes are in the paper's matrix and the control
    assert sec["n"] == [2, 2] and sec["headline"]["total"] == 0.0
    assert sec["control"]["combined"]["all"]["train"]["any"]["n"] == [2, 2]
    assert {r["id"]: r["decision"] for r in method.truth_rows(sec) if "canary" in r["tags"]} == {
        "c0/train/0": False, "c0/train/1": False, "c1/train/0": True}
