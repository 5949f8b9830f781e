"""Run one experiment in Flower's Simulation Engine (Ray backend): the entry point ``fedmem run`` uses."""

from __future__ import annotations

from pathlib import Path

from flwr.simulation import run_simulation

from clients.client_app import make_client_app
from fedmem.config.experiment import ExperimentConfig
from fedmem.experiment.preflight import client_cpus
from server.server_app import make_server_app


def simulate(cfg: ExperimentConfig, start_round: int = 0) -> None:
    """The federated rounds of a started run (its resolved config written), from the start or (``start_round`` > 0)
    after that round. The ServerApp runs in this process and gets the config as it is; each ClientApp, in a Ray
    actor, reads the run's written config.yaml."""
    sim = cfg.simulation
    init_args = {"log_to_driver": True, "include_dashboard": False}
    if sim.ray_address:  # attach: the cluster outlives the run; only the run's actors are stopped at its end
        init_args["address"] = sim.ray_address
    run_simulation(
        server_app=make_server_app(cfg, start_round),
        client_app=make_client_app(str(Path(cfg.run_dir) / "config.yaml")),
        num_supernodes=cfg.num_clients + cfg.data.audit_canary_clients,
        backend_name=sim.backend,
        backend_config={
            "client_resources": {"num_cpus": client_cpus(cfg), "num_gpus": sim.num_gpus_per_client},
            "init_args": init_args,
        },
    )
