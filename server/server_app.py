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
from fedmem.federation.canary_clients import RELEASE_STREAM, is_canary, release_scale
from fedmem.federation.privacy import NOISE_STREAM, flower_wrapper, sampled_clients, seeded_noise
from fedmem.federation.rounds import (
    Reply,
    RoundFailedError,
    aggregate_train_metrics,
    diverged_line,
    flower_strategy,
    last_line,
    participation,
)
from fedmem.reports.pages import headline
import clients.zero_update  # noqa: F401  (a zero update through Flower's DP clipping)
from server.adaptive_clipping import CORRECTED
from server.canary_clients import CanaryClients, is_canary_reply


def _metrics(record) -> dict:
    return dict(next(iter(record.metric_records.values())))


def _reply(message) -> Reply:
    if message.has_error():
        return Reply(int(message.metadata.src_node_id), error=last_line(message.error.reason))
    metrics = dict(message.content["metrics"])
    return Reply(int(message.metadata.src_node_id), int(metrics["partition_id"]), metrics)


class Recording:
    """What fedmem adds to the Flower strategy it runs, mixed in before it (``build_strategy``): clients aggregated in
    client order (so the average's bits never depend on arrival order), who took part, each client's train metrics
    and the round's clipping norm recorded for the round report, the canary clients' messages and release
    (``server/canary_clients.py``, the rules in ``fedmem.federation.canary_clients``), and a round failed before
    anything of it is averaged where a client's training diverged. It sits outside Flower's DP wrapper, so that a
    round with a failed client stops the run before the wrapper could skip its aggregation."""

    cfg: ExperimentConfig
    canaries: CanaryClients | None

    def configure_train(self, server_round, arrays, config, grid):
        self.clipping[server_round] = getattr(self, "clipping_norm", None)  # adaptive: this round's norm
        self.current, self.offset = arrays, int(config.get("round-offset", 0))
        if self.canaries:  # Flower samples the real clients among their own nodes, as it would without canaries
            grid = self.canaries.real_nodes(grid)
        messages = list(super().configure_train(server_round, arrays, config, grid))
        self.sampled[server_round] = len(messages)
        if self.canaries and messages:
            messages += self.canaries.messages(server_round + self.offset, messages)
        return messages

    def aggregate_train(self, server_round, replies):
        cfg, canaries = self.cfg, self.canaries
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
        # a client whose training diverged fails the round before anything of it is averaged
        if line := diverged_line(server_round + self.offset, self.train_log[server_round], cfg.train):
            raise RoundFailedError(line)
        if self.keep_updates:  # each client's update as the server received it, for the audits (SPEC §11)
            self.keep_updates(server_round, {int(r.content["metrics"]["partition_id"]):
                                             r.content["arrays"].to_torch_state_dict() for r in trained})
        with seeded_noise(cfg.seed, NOISE_STREAM, server_round + self.offset):
            arrays, metrics = super().aggregate_train(server_round, trained)
        if planted:
            self.canary_release(server_round, trained, canaries.prepared(planted, trained, self.current))
        return arrays, metrics

    def canary_release(self, server_round, trained, planted):
        """The round's canary release (fedmem.federation.canary_clients): the real replies (already clipped:
        clipping them again leaves them) and the canaries' through the same wrapper, its noise calibrated to all of
        them and drawn apart; handed to the client-level audit's archive, never the global model."""
        cfg, canaries = self.cfg, self.canaries
        run_round, real = server_round + self.offset, getattr(self, "num_sampled_clients", None)
        if real is not None:
            self.num_sampled_clients = real + len(planted)
        try:
            with seeded_noise(cfg.seed, RELEASE_STREAM, run_round):
                arrays, _ = super().aggregate_train(server_round, trained + planted)
        finally:
            if real is not None:
                self.num_sampled_clients = real
        release = canaries.released(arrays, self.current, len(trained), len(planted))
        if release is not None and self.keep_canary_release:
            scale = release_scale(cfg.defense, getattr(self, "clipping_norm", None),
                                  real if real is not None else len(trained), len(trained), len(planted))
            scale["sampling_rate"] = canaries.per_round / canaries.count  # each canary's chance to be in a round
            self.keep_canary_release(run_round, release.to_torch_state_dict(), self.current.to_torch_state_dict(),
                                     scale)


def build_strategy(cfg: ExperimentConfig):
    """The Flower strategy ``strategy.name`` names, inside Flower's DP wrapper when ``defense=dp``, with fedmem's
    recording mixed in before it (:class:`Recording`)."""
    module, name, arguments = flower_strategy(cfg.strategy, cfg.num_clients, equal_weights=cfg.defense.active)
    cls = getattr(importlib.import_module(module), name)
    aggregate = lambda records, key: MetricRecord(  # noqa: E731
        aggregate_train_metrics([m for r in records if not is_canary(int((m := _metrics(r))["partition_id"]),
                                                                     cfg.num_clients)], key))
    wrapper = flower_wrapper(cfg.defense, sampled_clients(cfg.strategy, cfg.num_clients))
    if wrapper:  # Flower's adaptive-clipping wrappers, corrected to Andrew et al.'s rule (server/adaptive_clipping.py)
        outer = CORRECTED.get(wrapper[0]) or getattr(flwr.serverapp.strategy, wrapper[0])
        args, kwargs = (cls(**arguments, train_metrics_aggr_fn=aggregate),), wrapper[1]
    else:
        outer, args, kwargs = cls, (), {**arguments, "train_metrics_aggr_fn": aggregate}
    strategy = type(f"Recording{outer.__name__}", (Recording, outer), {})(*args, **kwargs)
    strategy.cfg = cfg
    # SPEC §10: the canary clients sit beside the real ones; none of their metrics counts
    strategy.canaries = CanaryClients(cfg) if cfg.data.audit_canary_clients else None
    strategy.train_log, strategy.sampled, strategy.participation, strategy.clipping = {}, {}, {}, {}
    strategy.keep_updates = None  # (round, {client: adapter}) -> None: set when the run keeps its clients' updates
    # (run round, release, the round's global model before it, the release's scale) -> None: what the client-level
    # audit keeps of the canary release (fedmem.experiment.archive)
    strategy.keep_canary_release = None
    return strategy


def run_server(grid: Grid, cfg: ExperimentConfig, start_round: int = 0) -> None:
    """The rounds after ``start_round`` (0: a new run; k > 0: continue a run from its round-k adapter). Flower counts
    the continued rounds from 1, so clients receive the offset ("round-offset") and use the run's round numbers."""
    auditor, initial = training_auditor(cfg, "fl", start_round)
    strategy = build_strategy(cfg)
    if auditor.archive.writes:
        strategy.keep_updates = lambda r, states: auditor.archive.save_updates(r + start_round, states)
    strategy.keep_canary_release = auditor.archive.save_canary_release

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
                    on_end: Callable[[], None] | None = None, grid_view: Callable[[Grid], Grid] | None = None
                    ) -> ServerApp:
    """A ServerApp for one validated config (the simulation hands it down). ``cfg=None``: read the resolved config
    named by the run config (``flwr run``). ``start_round``: continue the run after that round (``fedmem run
    resume=DIR``). ``on_end``: called once the rounds are over, however they ended (finished, failed, interrupted).
    ``grid_view``: what the rounds see of Flower's grid (the simulation's, ``server.simulation``)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        try:
            run_server(grid_view(grid) if grid_view else grid, cfg or load_config(context.run_config["config-path"]),
                       start_round)
        finally:
            if on_end:
                on_end()

    return app


app = make_server_app()
