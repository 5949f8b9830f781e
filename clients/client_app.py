"""Flower ClientApp: one client's local LoRA training per round. Thin: the work is ``fedmem.experiment.runtime``.

Only the adapter crosses the wire, both ways. The FedProx mu comes from the server ("proximal-mu" in the
train config, set by flwr's FedProx strategy); FedAvg sends none, which is mu = 0.
"""

from __future__ import annotations

import functools

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from fedmem.config.compose import load_config
from fedmem.experiment.runtime import client_round


@functools.lru_cache(maxsize=4)
def run_config(path: str):
    """A run's config, read once per process: a SuperNode serves every round of a run from the same file."""
    return load_config(path)


def make_client_app(config_path: str | None = None, round_fn=client_round) -> ClientApp:
    """A ClientApp for one resolved config. ``config_path=None``: read it from the run config (``flwr run``).
    ``round_fn``: the local round (``fedmem.experiment.runtime.client_round``; tests wrap it to make a client fail)."""
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        cfg = run_config(config_path or context.run_config["config-path"])
        torch.set_num_threads(cfg.simulation.torch_threads)
        client = int(context.node_config["partition-id"])
        if client >= cfg.num_clients:  # e.g. `flwr run` on a federation with more supernodes than clients
            raise ValueError(f"supernode partition-id {client} but the config has {cfg.num_clients} clients: "
                             f"run with num-supernodes = data.num_clients ({cfg.num_clients})")
        conf = msg.content["config"]
        state, metrics = round_fn(
            cfg,
            client,
            msg.content["arrays"].to_torch_state_dict(),
            server_round=int(conf["server-round"]) + int(conf.get("round-offset", 0)),  # a resumed run's numbering
            mu=float(conf.get("proximal-mu", 0.0)),
        )
        metrics = MetricRecord({**metrics, "partition_id": client})
        return Message(RecordDict({"arrays": ArrayRecord(torch_state_dict=state), "metrics": metrics}), reply_to=msg)

    return app


app = make_client_app()
