"""Run one experiment in Flower's Simulation Engine (Ray backend): the entry point ``fedmem run`` uses."""

from __future__ import annotations

from flwr.simulation import run_simulation

from clients.client_app import make_client_app
from fedmem.experiment_config import load_config
from server.server_app import make_server_app


def simulate(config_path: str, start_round: int = 0) -> None:
    """The experiment of a resolved config, from the start or (``start_round`` > 0) after that round."""
    cfg = load_config(config_path)
    sim = cfg.simulation
    init_args = {"log_to_driver": True, "include_dashboard": False}
    if sim.ray_address:  # attach: the cluster outlives the run; only the run's actors are stopped at its end
        init_args["address"] = sim.ray_address
    run_simulation(
        server_app=make_server_app(config_path, start_round),
        client_app=make_client_app(config_path),
        num_supernodes=cfg.num_clients,
        backend_name=sim.backend,
        backend_config={
            "client_resources": {"num_cpus": sim.num_cpus_per_client, "num_gpus": sim.num_gpus_per_client},
            "init_args": init_args,
        },
    )
