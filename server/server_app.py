"""Flower ServerApp: the strategy loop plus fedmem's per-round audit (round 0 and after every round).

Thin: the round rules (participation, failure, metric aggregation, the strategy and its arguments) live in
``fedmem.federation.rounds``, the audit and reports in ``fedmem.experiment``; this file turns Flower's messages
into plain values for them and hands the aggregated adapter to the audit.
"""

from __future__ import annotations

import importlib
from typing import Callable

import flwr.serverapp.strategy
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp

from fedmem.config import ExperimentConfig, load_config
from fedmem.experiment.auditor import training_auditor
from fedmem.experiment.lifecycle import record_failure
from fedmem.federation.canary_clients import is_canary
from fedmem.federation.privacy import flower_wrapper, sampled_clients
from fedmem.federation.rounds import (
    Reply,
    RoundFailedError,
    aggregate_train_metrics,
    flower_strategy,
    last_line,
    participation,
)
from fedmem.reports.pages import headline
from server.adaptive_clipping import CORRECTED
from server.canary_clients import CanaryClients, is_canary_reply


def _metrics(record) -> dict:
    return dict(next(iter(record.metric_records.values())))


def _reply(message) -> Reply:
    if message.has_error():
        return Reply(int(message.metadata.src_node_id), error=last_line(message.error.reason))
    metrics = dict(message.content["metrics"])
    return Reply(int(message.metadata.src_node_id), int(metrics["partition_id"]), metrics)


def build_strategy(cfg: ExperimentConfig):
    """The Flower strategy ``strategy.name`` names, inside Flower's DP wrapper when ``defense=dp``, aggregating in
    client order (so the average's bits never depend on arrival order) and recording who took part, each client's
    train metrics and the round's clipping norm for the round report. The recording sits outside the wrapper, so
    that a round with a failed client stops the run before the wrapper could skip its aggregation."""
    module, name, arguments = flower_strategy(cfg.strategy, cfg.num_clients, equal_weights=cfg.defense.active)
    cls = getattr(importlib.import_module(module), name)
    canaries = CanaryClients(cfg) if cfg.data.audit_canary_clients else None  # SPEC §10: none of their metrics counts
    aggregate = lambda records, key: MetricRecord(  # noqa: E731
        aggregate_train_metrics([m for r in records if not is_canary(int((m := _metrics(r))["partition_id"]),
                                                                     cfg.num_clients)], key))
    # Flower's noise is calibrated to the replies it averages, canaries included, so that its noise on the sum is z C
    averaged = sampled_clients(cfg.strategy, cfg.num_clients) + (canaries.per_round if canaries else 0)
    wrapper = flower_wrapper(cfg.defense, averaged)
    if wrapper:  # Flower's adaptive-clipping wrappers, corrected to Andrew et al.'s rule (server/adaptive_clipping.py)
        outer = CORRECTED.get(wrapper[0]) or getattr(flwr.serverapp.strategy, wrapper[0])
        args, kwargs = (cls(**arguments, train_metrics_aggr_fn=aggregate),), wrapper[1]
    else:
        outer, args, kwargs = cls, (), {**arguments, "train_metrics_aggr_fn": aggregate}

    class Recording(outer):
        def configure_train(self, server_round, arrays, config, grid):
            self.clipping[server_round] = getattr(self, "clipping_norm", None)  # adaptive: this round's norm
            self.current = arrays
            if canaries:  # Flower samples the real clients among their own nodes, as it would without canaries
                grid = canaries.real_nodes(grid)
            messages = list(super().configure_train(server_round, arrays, config, grid))
            self.sampled[server_round] = len(messages)
            if canaries and messages:
                messages += canaries.messages(server_round + int(config.get("round-offset", 0)), messages)
            return messages

        def aggregate_train(self, server_round, replies):
            replies = list(replies)
            planted = sorted((r for r in replies if is_canary_reply(r, cfg.num_clients)),
                             key=lambda r: int(r.content["metrics"]["partition_id"]))
            replies = [r for r in replies if not is_canary_reply(r, cfg.num_clients)]
            if canaries and len(planted) < canaries.per_round:
                raise RoundFailedError(f"round {server_round}: {len(planted)} of the {canaries.per_round} canary "
                                       f"clients sampled replied")
            seen = [_reply(r) for r in replies]
            sampled = self.sampled.get(server_round, len(seen))
            self.participation[server_round] = participation(server_round, sampled, seen,
                                                             cfg.strategy.min_trained_clients)
            trained = sorted((r for r in replies if not r.has_error()),
                             key=lambda r: int(r.content["metrics"]["partition_id"]))
            self.train_log[server_round] = {int(r.content["metrics"]["partition_id"]): dict(r.content["metrics"])
                                            for r in trained}
            if self.keep_updates:  # each client's update as the server received it, for the audits (SPEC §11)
                self.keep_updates(server_round, {int(r.content["metrics"]["partition_id"]):
                                                 r.content["arrays"].to_torch_state_dict() for r in trained})
            if not planted:
                return super().aggregate_train(server_round, trained)
            arrays, metrics = super().aggregate_train(server_round,
                                                      trained + canaries.prepared(planted, trained, self.current))
            return canaries.released(arrays, self.current, len(trained), len(planted)), metrics

    strategy = Recording(*args, **kwargs)
    strategy.train_log, strategy.sampled, strategy.participation, strategy.clipping = {}, {}, {}, {}
    strategy.keep_updates = None  # (round, {client: adapter}) -> None: set when the run keeps its clients' updates
    return strategy


def run_server(grid: Grid, cfg: ExperimentConfig, start_round: int = 0) -> None:
    """The rounds after ``start_round`` (0: a new run; k > 0: continue a run from its round-k adapter). Flower counts
    the continued rounds from 1, so clients receive the offset ("round-offset") and use the run's round numbers."""
    auditor, initial = training_auditor(cfg, "fl", start_round)
    strategy = build_strategy(cfg)
    if auditor.archive.writes:
        strategy.keep_updates = lambda r, states: auditor.archive.save_updates(r + start_round, states)

    def evaluate(flower_round: int, arrays: ArrayRecord) -> MetricRecord:
        if start_round and flower_round == 0:  # the round we continue from was audited before the interruption
            return MetricRecord(headline(auditor.history[-1]))
        figures = auditor.evaluate(flower_round + start_round, arrays.to_torch_state_dict(),
                                   strategy.train_log.get(flower_round), strategy.participation.get(flower_round),
                                   strategy.clipping.get(flower_round))
        return MetricRecord(figures)

    try:
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(torch_state_dict=initial),
            num_rounds=cfg.strategy.num_rounds - start_round,
            timeout=cfg.strategy.round_timeout,
            train_config=ConfigRecord({"round-offset": start_round}),
            evaluate_fn=evaluate,
        )
    except RoundFailedError as e:  # Flower may only log an exception of the ServerApp: leave it for the run too
        record_failure(cfg.run_dir, str(e))
        raise
    auditor.finish()


def make_server_app(cfg: ExperimentConfig | None = None, start_round: int = 0,
                    on_end: Callable[[], None] | None = None) -> ServerApp:
    """A ServerApp for one validated config (the simulation hands it down). ``cfg=None``: read the resolved config
    named by the run config (``flwr run``). ``start_round``: continue the run after that round (``fedmem run
    resume=DIR``). ``on_end``: called once the rounds are over, however they ended (finished, failed, interrupted)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        try:
            run_server(grid, cfg or load_config(context.run_config["config-path"]), start_round)
        finally:
            if on_end:
                on_end()

    return app


app = make_server_app()
