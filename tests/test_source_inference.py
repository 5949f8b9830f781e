"""Source inference by the server on real tiny models: three clients' LoRA updates, each trained on its own records
(planted canaries included), kept in a run directory as the server keeps them, then attributed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import make_run, make_sample, memorize, texts, tiny_model, tiny_tokenizer

from fedmem.audit.base import AuditedModel, build_method_config
from fedmem.audit.source_inference import SourceInference, SourceInferenceConfig, attribute
from fedmem.common.io import to_jsonable
from fedmem.engine.config import ModelConfig
from fedmem.engine.model.load import adapter_state, copy_with_adapter, load_adapter_state, wrap_lora
from fedmem.experiment.archive import RunArchive
from fedmem.reports.views import view_for

N_CLIENTS, N, SUFFIX = 3, 16, 24
LORA = ModelConfig(lora_r=16, lora_alpha=32, lora_dropout=0.0,
                   target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                                   "lm_head"])


def fedavg(states: list[dict]) -> dict:
    return {k: torch.stack([s[k] for s in states]).mean(0) for k in states[0]}


@pytest.fixture(scope="module")
def federation(one_torch_thread, tmp_path_factory):
    """(pool, global LoRA model, archive, method, its sections of rounds 0 and 1): round 1's updates are each
    client's LoRA trained on its own records (its canary among them) from the round-0 global adapter, its global
    adapter their average."""
    tok = tiny_tokenizer()
    pool = make_run(tok, n_clients=N_CLIENTS, n_train=N + 1, n_test=N, prefix_len=16, suffix_len=SUFFIX)
    base = tiny_model(tok)
    memorize(base, [make_sample(tok, t, 0, "train", i, 16, SUFFIX) for i, t in enumerate(texts(96, 900))],
             steps=30, lr=3e-3)  # a prior on text of the same generator
    torch.manual_seed(0)
    model = wrap_lora(base, LORA).eval()
    start = adapter_state(model)
    archive = RunArchive(tmp_path_factory.mktemp("run"), writes=True, keep=True)
    updates = {}
    for c in pool.clients:
        local = copy_with_adapter(model, start)
        memorize(local, pool.train[c], steps=60, lr=5e-3, seed=c)
        updates[c] = adapter_state(local)
    archive.save_updates(1, updates)
    method = SourceInference(SourceInferenceConfig(n=N, suffix_len=SUFFIX), pool)
    round0 = method.audit(AuditedModel(pool=pool, round=0, model=model, batch_size=128, archive=archive))
    load_adapter_state(model, fedavg(list(updates.values())))
    audited = AuditedModel(pool=pool, round=1, model=model, batch_size=128, archive=archive)
    round1 = method.audit(audited)
    return pool, model, archive, method, round0, round1, audited


def test_ties_are_split_between_the_tied_clients():
    shares = attribute(np.array([[0.1, 0.3, 0.2], [0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]))
    np.testing.assert_allclose(shares, [[0, 1, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]])


def test_records_are_attributed_to_the_client_that_trained_on_them(federation):
    _, _, _, _, _, round1, audited = federation
    h = round1["headline"]
    assert round1["updated"] == [0, 1, 2] and h["chance"] == pytest.approx(1 / 3)
    assert h["accuracy_ci95"][0] > 1 / 3, h  # above chance, by its interval
    for c in round1["train"]["per_client"]:
        assert c["records"] == N and c["accuracy_ci95"][0] > 1 / 3, c
    # each client's planted canary (4 copies, trained on by its client only) goes to that client
    assert [(k["client"], k["group"], k["records"]) for k in round1["canaries"]] == [(0, "4", 1), (1, "4", 1),
                                                                                   (2, "4", 1)]
    assert all(k["to_a_holder"] == 1.0 for k in round1["canaries"])
    assert audited.passes == {"client_logprobs": 3, "global_logprobs": 1}  # one pass per local model, one global


def test_the_held_out_control_sits_at_chance_on_clients_of_one_distribution(federation):
    h = federation[5]["headline"]
    lo, hi = h["heldout_accuracy_ci95"]
    assert lo < 1 / 3 < hi  # the clients' texts come from one generator: no client's update favours its test texts
    assert h["excess"] == pytest.approx(h["accuracy"] - h["heldout_accuracy"]) and h["excess_ci95"][0] > 0


def test_the_margin_excess_is_welchs_difference_of_the_records_own_client_leads(federation):
    """Recomputed from the section's own samples: a record's margin is its own client's drop minus the largest other
    drop; the excess is the training records' mean margin minus the held-out ones', with Welch's interval, which
    (unlike the accuracy's excess) has no ceiling. Round 0's margins are all 0."""
    from scipy import stats

    round0, round1 = federation[4], federation[5]
    margins = {"train": [], "test": []}
    for s in round1["samples"]:
        if s["drawn"]:
            own = round1["updated"].index(s["client"])
            margins[s["split"]].append(s["drops"][own] - max(v for k, v in enumerate(s["drops"]) if k != own))
    train, held = np.array(margins["train"]), np.array(margins["test"])
    assert len(train) == len(held) == N_CLIENTS * N  # the same number of records from every client, on both arms
    h = round1["headline"]
    assert h["margin_excess"] == pytest.approx(train.mean() - held.mean())
    welch = stats.ttest_ind(train, held, equal_var=False).confidence_interval(0.95)
    assert h["margin_excess_ci95"] == pytest.approx([welch.low, welch.high])
    assert h["margin_excess_ci95"][0] > 0 and h["margin_excess_mde"] > 0  # trained records lead by more
    assert round0["headline"]["margin_excess"] == 0.0 and round0["headline"]["margin_excess_ci95"] == [0.0, 0.0]


def test_a_client_short_of_records_on_either_arm_is_refused_naming_the_n_that_works(federation):
    pool = federation[0]
    SourceInference.check_pool(SourceInferenceConfig(n=N, suffix_len=SUFFIX), pool)  # every client gives N
    with pytest.raises(ValueError, match=rf"^audit.sia.n={N + 1}, but client \d+ has only {N} (train|held-out) "
                                         rf"records with {SUFFIX} suffix tokens .*: set audit.sia.n={N} or lower "
                                         r"audit.sia.suffix_len$"):
        SourceInference.check_pool(SourceInferenceConfig(n=N + 1, suffix_len=SUFFIX), pool)


def test_round_0_has_no_update_and_sits_exactly_at_chance(federation):
    _, _, _, method, round0, _, _ = federation
    h = round0["headline"]
    assert h["accuracy"] == pytest.approx(1 / 3) and h["heldout_accuracy"] == pytest.approx(1 / 3)
    assert not round0["from_updates"] and "Round 0" in round0["note"]
    assert np.allclose(round0["train"]["matrix"], N / 3)
    assert method.truth_rows(round0) == [] and method.verdicts(round0) == {}
    assert round0["updates"] == {"clients": 0, "bytes": 0, "kept": True}


def test_every_row_of_the_attribution_matrix_sums_to_the_clients_audited_records(federation):
    for section in federation[4:6]:
        for arm in ("train", "heldout"):
            matrix = np.array(section[arm]["matrix"])
            assert np.allclose(matrix.sum(axis=1), N) and matrix.sum() == pytest.approx(section[arm]["records"])
        for k in section["canaries"]:
            assert sum(k["guessed"]) == pytest.approx(k["records"])


def test_verdicts_flag_a_record_whose_own_client_is_the_only_best_guess(federation):
    _, _, _, method, _, round1, _ = federation
    [(label, rows)] = method.verdicts(round1).items()
    assert label == "sia" and len(rows) == len(round1["samples"])
    for row, s in zip(rows, round1["samples"]):
        own = round1["updated"].index(s["client"])
        margin = s["drops"][own] - max(v for k, v in enumerate(s["drops"]) if k != own)
        assert row["score"] == pytest.approx(margin) and row["decision"] == (margin > 0)
    train = [r for r in rows if r["split"] == "train" and "canary" not in r["tags"]]
    assert sum(r["decision"] for r in train) / len(train) == pytest.approx(round1["headline"]["accuracy"])


def test_the_updates_disk_cost_is_reported(federation):
    _, _, archive, _, _, round1, _ = federation
    files = sorted(archive.updates_dir(1).glob("client_*.safetensors"))
    assert len(files) == N_CLIENTS
    assert round1["updates"] == {"clients": 3, "bytes": sum(f.stat().st_size for f in files), "kept": True}
    assert round1["headline"]["update_bytes"] == round1["updates"]["bytes"]


def test_a_centralized_run_has_no_clients_and_says_so(federation):
    pool, model, archive, method, _, _, _ = federation
    section = method.audit(AuditedModel(pool=pool, round=1, model=model, label="cl", archive=archive))
    assert all(v is None for v in section["headline"].values())
    assert "centralized run has no clients" in section["note"] and method.verdicts(section) == {}
    assert view_for(method).summary(section, section).endswith("source inference does not apply.")


def test_a_round_after_0_without_kept_updates_is_an_error(federation, tmp_path):
    pool, model, _, method, _, _, _ = federation
    with pytest.raises(ValueError, match="round 1: no client's update was kept"):
        method.audit(AuditedModel(pool=pool, round=1, model=model, archive=RunArchive(tmp_path)))


def test_section_follows_the_report_schema_and_reads_on_the_pages(federation, tmp_path):
    import jsonschema

    _, _, _, method, round0, round1, _ = federation
    schema = json.loads((Path(__file__).resolve().parents[1] / "fedmem/reports/report.schema.json").read_text())
    for section in (round0, round1):
        clean = json.loads(json.dumps(to_jsonable({k: v for k, v in section.items() if k != "seconds"})))
        jsonschema.validate(clean, {"$defs": schema["$defs"], "$ref": "#/$defs/section"})
    view = view_for(method)
    md = view.markdown(round1)
    assert "| true client \\ guessed client |" in md and "canaries × 4" in md and "chance is 1/3 = 33.33%" in md
    assert view.render(round1, str(tmp_path)) == [("Source inference: records attributed to each client, %",
                                                    "sia_attribution.png")]
    assert (tmp_path / "sia_attribution.png").is_file()
    assert view.summary(round0, round1).startswith("**Source inference by the server.** From the round's updates")


@pytest.mark.parametrize("section, message", [
    ({"n": 0}, "audit.sia.n must be >= 1"),
    ({"context": "chat"}, "audit.sia.context must be one of train, prompt"),
    ({"keep": True}, "unknown option(s) ['keep']"),
])
def test_invalid_config_is_rejected(section, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build_method_config("sia", section)
