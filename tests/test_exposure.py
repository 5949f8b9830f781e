"""Canary exposure: the rank arithmetic, its chance level, and a real tiny model before and after it memorizes a
canary whose secret was drawn from a known set of values."""

import math

import numpy as np
import pytest

from fedmem.audit import AuditedModel
from fedmem.audit.exposure import Exposure, ExposureConfig, chance_exposure, exposure
from tests.helpers import make_run, make_sample, memorize, tiny_model, tiny_tokenizer


def test_exposure_is_log2_candidates_minus_log2_rank():
    logps = np.array([-3.0, -1.0, -2.0, -5.0])
    assert exposure(-1.0, logps) == (1, 2.0)  # ranked first of 4: log2 4
    assert exposure(-5.0, logps) == (4, 0.0)  # ranked last
    assert exposure(-2.0, logps) == (2, 1.0)
    assert exposure(-2.0, np.array([-2.0, -2.0, -9.0, -9.0])) == (1, 2.0)  # a tie counts in the secret's favour
    # a value ranked uniformly at random: the mean over every rank
    assert chance_exposure(100) == pytest.approx(np.mean([math.log2(100 / r) for r in range(1, 101)]))
    assert chance_exposure(10 ** 5) == pytest.approx(1 / math.log(2), abs=1e-3)  # 1.44 bits for large N


@pytest.fixture(scope="module")
def canary_run():
    tok = tiny_tokenizer()
    run = make_run(tok, n_clients=1, n_train=2, n_test=2, prefix_len=12, suffix_len=80)
    secret = "0417"
    text = ("The clinic wrote to me about the scan results last week and said to call back soon. "
            f"My record number is {secret} and the nurse asked me to keep it safe for the next visit.")
    canary = make_sample(tok, text, 0, "train", 0, 12, 80, {"canary": "k", "copies": 4})
    assert secret in canary.suffix_text
    run.train[0][0] = canary
    run.ground_truth = {"canaries": [{"id": "k", "secret_parts": {"record_number": secret}, "secret_space": {
        "part": "record_number", "candidates": [f"04{i:02d}" for i in range(100)]}}]}
    return run, canary


def test_a_memorized_canary_ranks_first_and_an_unseen_one_does_not(canary_run):
    run, canary = canary_run
    method = Exposure(ExposureConfig(context="prompt"), run)
    model = tiny_model(run.tokenizer)
    before = method.audit(AuditedModel(pool=run, round=0, model=model, merge_adapter=False))
    memorize(model, [canary], steps=80)
    after = method.audit(AuditedModel(pool=run, round=1, model=model, merge_adapter=False))
    row = after["canaries"][0]
    assert row["candidates"] == 100 and row["rank"] == 1
    assert after["headline"]["exposure"] == pytest.approx(math.log2(100))
    assert before["canaries"][0]["rank"] > 1 and before["headline"]["exposure"] < math.log2(100)
    assert after["headline"]["chance"] == pytest.approx(chance_exposure(100))
    assert after["by_copies"] == {"4": {"n": 1, "exposure": pytest.approx(math.log2(100)), "ranked_first": 1}}


def test_a_canary_several_clients_hold_is_scored_once(canary_run):
    run, canary = canary_run
    shared = type(run)(**{**run.__dict__, "train": {0: run.train[0], 1: [canary, *run.train[0][1:]]},
                          "test": {0: run.test[0], 1: run.test[0]}, "train_sizes": {0: 2, 1: 2}})
    assert [s.id for s, _, _ in Exposure(ExposureConfig(context="prompt"), shared).canaries] == [canary.id]


def test_a_canary_whose_secret_is_in_the_prefix_is_counted_not_scored(canary_run):
    run, canary = canary_run
    run = type(run)(**{**run.__dict__, "ground_truth": {"canaries": [{
        "id": "k", "secret_parts": {"record_number": "clinic"}, "secret_space": {
            "part": "record_number", "candidates": ["clinic", "office"]}}]}})
    method = Exposure(ExposureConfig(context="prompt"), run)
    assert method.canaries == [] and method.secret_in_prefix == 1
