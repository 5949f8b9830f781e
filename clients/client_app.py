"""Flower ClientApp: one client's local LoRA training per round. Thin: the work is ``fedmem.experiment.training``.

Only the adapter crosses the wire, both ways (clipped by Flower's mod first when the run's defense clips on the
client). The train config the server sent goes to the round as it came
(the round number, and whatever the strategy sends for its term in the local loss, such as FedProx's mu).
"""

from __future__ import annotations

import functools

import flwr.clientapp.mod
import torch
from flwr.app import ArrayRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

import clients.zero_update  # noqa: F401  (a zero update through Flower's DP clipping)
from fedmem.config import load_config
from fedmem.experiment.training import check_partition, client_round
from fedmem.federation import canary_clients
from fedmem.federation.privacy import client_mod


@functools.lru_cache(maxsize=4)
def run_config(path: str):
    """A run's config, read once per process: a SuperNode serves every round of a run from the same file."""
    return load_config(path)


def make_client_app(config_path: str | None = None, round_fn=client_round) -> ClientApp:
    """A ClientApp for one resolved config. ``config_path=None``: read it from the run config (``flwr run``).
    ``round_fn``: the local round (``fedmem.experiment.training.client_round``; tests wrap it to make a client fail)."""
    def config_of(context: Context):
        return run_config(config_path or context.run_config["config-path"])

    def defense_mod(msg: Message, context: Context, call_next) -> Message:
        """The Flower mod the run's defense needs on the client (DP with client-side clipping clips the update
        before it leaves), or none; chosen per run, as the app serves whichever run's config it is given."""
        name = client_mod(config_of(context).defense) if msg.metadata.message_type == MessageType.TRAIN else None
        return getattr(flwr.clientapp.mod, name)(msg, context, call_next) if name else call_next(msg, context)

    app = ClientApp(mods=[defense_mod])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        cfg = config_of(context)
        torch.set_num_threads(cfg.simulation.torch_threads)
        client = check_partition(cfg, int(context.node_config["partition-id"]))
        received = msg.content["arrays"].to_torch_state_dict()
        if canary_clients.is_canary(client, cfg.num_clients):  # no data: its fixed direction (SPEC §10)
            state, metrics = canary_clients.reply(received, client, cfg.num_clients, cfg.seed, cfg.defense)
        else:
            state, metrics = round_fn(cfg, client, received, dict(msg.content["config"]))
        metrics = MetricRecord({**metrics, "partition_id": client})
        return Message(RecordDict({"arrays": ArrayRecord(torch_state_dict=state), "metrics": metrics}), reply_to=msg)

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        """The node's partition: the server tells the canary clients' nodes from the real clients' by it."""
        partition = MetricRecord({"partition_id": int(context.node_config["partition-id"])})
        return Message(RecordDict({"metrics": partition}), reply_to=msg)

    return app


app = make_client_app()
