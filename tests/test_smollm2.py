"""The real pretrained model end to end: SmolLM2-135M-Instruct from its GGUF file, one FedAvg round of the real
Flower simulation on a handful of real English texts, the real audits, and a re-audit of the saved round."""

from __future__ import annotations

import json

import pytest

from bench.references import english_passages
from fedmem.cli import main, run_experiment
from fedmem.config.compose import compose_dict
from tests.conftest import report_schema_errors


@pytest.mark.slow
def test_one_fedavg_round_of_smollm2_lowers_the_members_loss_and_reaudits(smollm2_dir, cache_dir, tmp_path, capsys):
    passages = english_passages(words_per_passage=36, stride=36)
    assert len(passages) >= 40, "needs the dependencies' licence texts (bench/references.py)"
    data = tmp_path / "prose.jsonl"
    data.write_text("".join(json.dumps({"text": t, "section": "ab"[i % 2]}) + "\n" for i, t in enumerate(passages[:40])))
    d = compose_dict([
        "model=smollm2-135m", "experiment=paper", f"cache_dir={cache_dir}", "task=text", "data=local",
        f"data.path={data}", "data.client_column=section", "data.num_clients=2", "data.train_per_client=4",
        "data.test_per_client=2", "model.max_seq_len=64", "train.local_epochs=4", "train.progress=false",
        "strategy=fedavg", "strategy.num_rounds=1", "audit.methods=[mr,pa]", "audit.prefix_len=16",
        "audit.samples_per_client=4", "audit.test_per_client=2", "audit.mr.n=4", "audit.mr.heldout=2",
        "audit.common_draw=0", "audit.mr.max_new_tokens=24",
        "audit.pa.n=4", "audit.pa.c=4", "audit.pa.suffix_len=16", "simulation.torch_threads=1",
    ])
    run = run_experiment(d, str(tmp_path / "run"))
    r0, r1 = (json.loads((run / f"round_{r}" / "report.json").read_text()) for r in (0, 1))
    assert not report_schema_errors(r0) and not report_schema_errors(r1)
    assert r1["source"]["gguf_sha256"] and r1["participation"]["trained"] == [0, 1]
    assert all(row["steps"] == 4 for row in r1["train"])  # four local epochs of one step each, per client
    # the members' texts became likelier: P(s|p) of every audited training suffix rose in one round
    before = {row["id"]: row["log10_p"] for row in r0["audit"]["pa"]["samples"]}
    after = {row["id"]: row["log10_p"] for row in r1["audit"]["pa"]["samples"]}
    assert len(before) == 8 and all(after[i] > before[i] for i in before)
    gen = r1["audit"]["mr"]["generation"]
    assert gen["ended_turn"] + gen["hit_cap"] == 8 and gen["decoding"]["top_k"] == 40  # the run's top_k preset

    main(["audit", f"run={run}", "rounds=[1]", "name=again", "audit.methods=[mr]"])
    again = json.loads((run / "audits" / "again" / "round_1" / "report.json").read_text())
    assert again["source"]["kind"] == "reaudit" and not report_schema_errors(again)
    assert again["source"]["gguf_sha256"] == r1["source"]["gguf_sha256"]
    assert sum(again["audit"]["mr"]["generation"][k] for k in ("ended_turn", "hit_cap")) == 8
    assert str(run / "audits" / "again") in capsys.readouterr().out


@pytest.mark.slow
def test_decoding_loop_greedy_equals_generate_on_smollm2(smollm2_dir):
    """The real pretrained model, prompts as MR builds them (a text's first words in the open user turn of its chat
    template): fedmem's decoding loop and transformers' ``generate`` give the same greedy tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from fedmem.engine.config import Decoding
    from fedmem.engine.generation import generate_batched

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir).eval()
    header = tok.apply_chat_template([{"role": "user", "content": "X"}], tokenize=False).split("X")[0]
    prompts = [tuple(tok(header + " ".join(p.split()[: 8 + 3 * i]), add_special_tokens=False)["input_ids"])
               for i, p in enumerate(english_passages(words_per_passage=36, stride=36)[:6])]
    greedy = Decoding("greedy")
    new = generate_batched(model, tok, prompts, 24, decoding=greedy, batch_size=4, backend="fedmem")
    old = generate_batched(model, tok, prompts, 24, decoding=greedy, batch_size=4, backend="transformers")
    assert new == old and all(new)
