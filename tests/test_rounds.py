"""The rules of a federated round (fedmem.federation.rounds), tested as plain functions, without Flower."""

from __future__ import annotations

import pytest

from fedmem.federation.rounds import (
    Reply,
    RoundFailedError,
    aggregate_train_metrics,
    flower_strategy,
    last_line,
    participation,
)
from fedmem.federation.strategies import strategy_config


def test_train_metrics_sum_counts_keep_the_longest_length_and_weight_the_rest_by_examples():
    rows = [{"train_loss": 1.0, "steps": 2, "num_examples": 10, "truncated_examples": 1, "max_seq_len": 64,
             "partition_id": 0},
            {"train_loss": 4.0, "steps": 3, "num_examples": 30, "truncated_examples": 0, "max_seq_len": 128,
             "partition_id": 1}]
    assert aggregate_train_metrics(rows, "num_examples") == {
        "train_loss": (1.0 * 10 + 4.0 * 30) / 40, "steps": 5, "num_examples": 40, "truncated_examples": 1,
        "max_seq_len": 128}


def test_a_round_records_who_took_part_in_client_order():
    replies = [Reply(node=7, partition=2, metrics={}), Reply(node=5, partition=0, metrics={}),
               Reply(node=9, error="disk full")]
    got = participation(3, sampled=4, replies=replies, min_trained=2)
    assert got == {"sampled": 4, "trained": [0, 2], "failed": [{"node": 9, "error": "disk full"}], "no_reply": 1}


def test_a_round_short_of_its_clients_fails_naming_them_and_their_errors():
    replies = [Reply(node=5, partition=0, metrics={}), Reply(node=9, error="disk full")]
    with pytest.raises(RoundFailedError, match=r"round 1: 1 of 2 sampled clients trained \(clients \[0\]\), "
                                               r"strategy.min_trained_clients needs 2; 1 failed, 0 sent no reply "
                                               r"\(node 9: disk full\)"):
        participation(1, sampled=2, replies=replies, min_trained=None)  # None: every sampled client must train


def test_last_line_keeps_the_exception_of_a_remote_traceback():
    assert last_line("Traceback (most recent call last):\n  File x\nRuntimeError: boom\n\n") == "RuntimeError: boom"
    assert last_line("") == "no detail"


def test_the_strategy_lookup_names_the_flower_class_and_its_arguments():
    module, cls, args = flower_strategy(strategy_config({"name": "fedprox", "proximal_mu": 0.1}), num_clients=3)
    assert (module, cls) == ("flwr.serverapp.strategy", "FedProx")
    assert args["proximal_mu"] == 0.1 and args["min_available_nodes"] == 3 and args["fraction_evaluate"] == 0.0
    module, cls, args = flower_strategy(strategy_config({"name": "fedavg", "min_trained_clients": 2}), 3)
    assert (module, cls, args["min_available_nodes"]) == ("flwr.serverapp.strategy", "FedAvg", 2)
    assert "proximal_mu" not in args
