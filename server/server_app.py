"""Flower ServerApp: the strategy loop plus fedmem's per-round audit hook (round 0 and after every round).

Thin: the audit, the reports and the model live in ``fedmem.experiment.auditor`` and ``fedmem.experiment.runtime``; this file only
maps the config to a Flower strategy and hands the aggregated adapter to the hook.
"""

from __future__ import annotations

import importlib

from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp import strategy as flwr_strategy

from fedmem.config.compose import load_config
from fedmem.config.experiment import ExperimentConfig
from fedmem.experiment.lifecycle import RoundFailedError, record_failure
from fedmem.experiment.runtime import run_auditor
from fedmem.federation.strategies import strategy_named
from fedmem.reports.pages import headline


def last_line(reason: str) -> str:
    """The exception line at the end of a client's error (Ray sends the whole remote traceback)."""
    lines = [x.strip() for x in str(reason).splitlines() if x.strip()]
    return lines[-1] if lines else "no detail"


WEIGHT_KEY = "num_examples"  # a client's share of the average (FedAvg's weighting), sent in its train metrics
COUNTS = ("steps", "num_examples", "truncated_examples")  # the round's totals
NOT_AGGREGATED = ("partition_id",)  # an id, not a figure


def aggregate_train_metrics(records: list[RecordDict], weight_key: str) -> MetricRecord:
    """The round's train metrics over its clients (Flower logs them): counts summed, the training length the
    longest, the loss and any other figure weighted by the clients' examples; the partition id left out."""
    rows = [dict(next(iter(r.metric_records.values()))) for r in records]
    out = {}
    for key in dict.fromkeys(k for row in rows for k in row):
        if key in NOT_AGGREGATED:
            continue
        values = [(row[key], float(row[weight_key])) for row in rows if key in row]
        if key in COUNTS:
            out[key] = int(sum(v for v, _ in values))
        elif key == "max_seq_len":
            out[key] = int(max(v for v, _ in values))
        else:
            out[key] = sum(float(v) * w for v, w in values) / (sum(w for _, w in values) or 1.0)
    return MetricRecord(out)


def flower_class(name: str) -> type:
    """A Flower strategy class: one of ``flwr.serverapp.strategy`` by name, or ``module:Class``."""
    if ":" in name:
        module, _, attr = name.partition(":")
        return getattr(importlib.import_module(module), attr)
    return getattr(flwr_strategy, name)


def build_strategy(cfg: ExperimentConfig):
    """The flwr strategy ``strategy.name`` registers (``fedmem.federation.strategies``), recording per-client train metrics for
    the round report."""
    s = cfg.strategy
    common = dict(
        fraction_train=s.fraction_train,
        fraction_evaluate=0.0,  # utility and audits run centrally on the global model (evaluate_fn)
        min_train_nodes=s.min_train_nodes,
        # a round starts once this many nodes are connected: with a lower minimum, the run goes on without lost nodes
        min_available_nodes=s.min_trained_clients or cfg.num_clients,
        weighted_by_key=WEIGHT_KEY,
        train_metrics_aggr_fn=aggregate_train_metrics,
    )
    spec = strategy_named(s.name)
    cls, extra = flower_class(spec.flower_class), spec.arguments(s)

    class Recording(cls):
        """Aggregates replies in client order, so the average's bits never depend on arrival order; counts a
        round only if enough sampled clients trained, and records who took part."""

        def configure_train(self, server_round, arrays, config, grid):
            messages = list(super().configure_train(server_round, arrays, config, grid))
            self.sampled[server_round] = len(messages)
            return messages

        def aggregate_train(self, server_round, replies):
            replies = list(replies)
            failed = [{"node": int(r.metadata.src_node_id), "error": last_line(r.error.reason)}
                      for r in replies if r.has_error()]
            replies = sorted((r for r in replies if not r.has_error()),
                             key=lambda r: int(r.content["metrics"]["partition_id"]))
            sampled = self.sampled.get(server_round, len(replies) + len(failed))
            trained = [int(r.content["metrics"]["partition_id"]) for r in replies]
            need = s.min_trained_clients or sampled
            no_reply = sampled - len(trained) - len(failed)
            self.participation[server_round] = {"sampled": sampled, "trained": trained, "failed": failed,
                                                "no_reply": no_reply}
            if len(trained) < need:
                errors = "; ".join(f"node {f['node']}: {f['error']}" for f in failed) or "no error reported"
                raise RoundFailedError(
                    f"round {server_round}: {len(trained)} of {sampled} sampled clients trained (clients "
                    f"{trained}), strategy.min_trained_clients needs {need}; {len(failed)} failed, "
                    f"{no_reply} sent no reply ({errors})")
            self.train_log[server_round] = {
                int(r.content["metrics"]["partition_id"]): dict(r.content["metrics"]) for r in replies
            }
            return super().aggregate_train(server_round, replies)

    strategy = Recording(**common, **extra)
    strategy.train_log, strategy.sampled, strategy.participation = {}, {}, {}
    return strategy


def run_server(grid: Grid, cfg: ExperimentConfig, start_round: int = 0) -> None:
    """The rounds after ``start_round`` (0: a new run; k > 0: continue a run from its round-k adapter). Flower counts
    the continued rounds from 1, so clients receive the offset ("round-offset") and use the run's round numbers."""
    auditor, initial = run_auditor(cfg, "fl", start_round)
    strategy = build_strategy(cfg)

    def evaluate(flower_round: int, arrays: ArrayRecord) -> MetricRecord:
        if start_round and flower_round == 0:  # the round we continue from was audited before the interruption
            return MetricRecord(headline(auditor.history[-1]))
        figures = auditor.evaluate(flower_round + start_round, arrays.to_torch_state_dict(),
                                   strategy.train_log.get(flower_round), strategy.participation.get(flower_round))
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


def make_server_app(cfg: ExperimentConfig | None = None, start_round: int = 0) -> ServerApp:
    """A ServerApp for one validated config (the simulation hands it down). ``cfg=None``: read the resolved config
    named by the run config (``flwr run``). ``start_round``: continue the run after that round (``fedmem run
    resume=DIR``)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        run_server(grid, cfg or load_config(context.run_config["config-path"]), start_round)

    return app


app = make_server_app()
