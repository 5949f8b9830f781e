"""Flower ServerApp: the strategy loop plus fedmem's per-round audit hook (round 0 and after every round).

Thin: the audit, the reports and the model live in ``fedmem.auditor`` and ``fedmem.runtime``; this file only
maps the config to a Flower strategy and hands the aggregated adapter to the hook.
"""

from __future__ import annotations

from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp import strategy as flwr_strategy

from fedmem.experiment_config import ExperimentConfig, load_config
from fedmem.runtime import make_auditor


def build_strategy(cfg: ExperimentConfig):
    """The flwr strategy named by ``strategy.name``, recording per-client train metrics for the round report."""
    s = cfg.strategy
    common = dict(
        fraction_train=s.fraction_train,
        fraction_evaluate=0.0,  # utility and audits run centrally on the global model (evaluate_fn)
        min_train_nodes=s.min_train_nodes,
        min_available_nodes=cfg.num_clients,
    )
    classes = {
        "fedavg": (flwr_strategy.FedAvg, {}),
        "fedprox": (flwr_strategy.FedProx, {"proximal_mu": s.proximal_mu}),
        "fedavgm": (flwr_strategy.FedAvgM, {"server_learning_rate": 1.0, "server_momentum": s.server_momentum}),
        "fedadam": (flwr_strategy.FedAdam, {"eta": s.server_lr}),
        "fedyogi": (flwr_strategy.FedYogi, {"eta": s.server_lr}),
    }
    cls, extra = classes[s.name]

    class Recording(cls):
        """Aggregates replies in client order, so the average's bits never depend on arrival order."""

        train_log: dict[int, dict] = {}

        def aggregate_train(self, server_round, replies):
            replies = sorted((r for r in replies if not r.has_error()),
                             key=lambda r: int(r.content["metrics"]["partition-id"]))
            self.train_log[server_round] = {
                int(r.content["metrics"]["partition-id"]): dict(r.content["metrics"]) for r in replies
            }
            return super().aggregate_train(server_round, replies)

    strategy = Recording(**common, **extra)
    strategy.train_log = {}
    return strategy


def run_server(grid: Grid, cfg: ExperimentConfig) -> None:
    auditor = make_auditor(cfg, label="fl")
    strategy = build_strategy(cfg)

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        figures = auditor.evaluate(server_round, arrays.to_torch_state_dict(), strategy.train_log.get(server_round))
        return MetricRecord(figures)

    strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(torch_state_dict=auditor.initial_adapter()),
        num_rounds=cfg.strategy.num_rounds,
        train_config=ConfigRecord({}),
        evaluate_fn=evaluate,
    )
    auditor.finish()


def make_server_app(config_path: str | None = None) -> ServerApp:
    """A ServerApp for one resolved config. ``config_path=None``: read it from the run config (``flwr run``)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        run_server(grid, load_config(config_path or context.run_config["config-path"]))

    return app


app = make_server_app()
