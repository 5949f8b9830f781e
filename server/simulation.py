"""Run one experiment in Flower's Simulation Engine (Ray backend): the entry point ``fedmem run`` uses."""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
from pathlib import Path

import ray
from flwr.simulation import run_simulation
from flwr.simulation.ray_transport.ray_actor import ClientAppActor

from clients.client_app import make_client_app
from fedmem.config.experiment import ExperimentConfig
from fedmem.experiment.preflight import client_cpus
from server.server_app import make_server_app


def simulate(cfg: ExperimentConfig, start_round: int = 0) -> None:
    """The federated rounds of a started run (its resolved config written), from the start or (``start_round`` > 0)
    after that round. The ServerApp runs in this process and gets the config as it is; each ClientApp, in a Ray
    actor, reads the run's written config.yaml."""
    sim = cfg.simulation
    # attach: the cluster outlives the run; only the run's actors are stopped at its end. Otherwise "local": Ray
    # given no address joins the cluster a `ray start` on this machine last recorded (or $RAY_ADDRESS), which would
    # put a private run's clients on someone else's cluster and end the run when that cluster stops
    init_args = {"log_to_driver": True, "include_dashboard": False,
                 "address": sim.ray_address if sim.attached else "local"}
    flwr_log, returned = logging.getLogger("flwr"), threading.Event()

    def server_ended() -> None:
        # the calls ended here would each log an error with its traceback: the run's outcome is fedmem's to report
        flwr_log.addFilter(_drop)
        threading.Thread(target=end_client_calls, args=(returned,), name="fedmem-end-client-calls", daemon=True).start()

    try:
        run_simulation(
            server_app=make_server_app(cfg, start_round, on_end=server_ended),
            client_app=make_client_app(str(Path(cfg.run_dir) / "config.yaml")),
            num_supernodes=cfg.num_clients + cfg.data.audit_canary_clients,
            backend_name=sim.backend,
            backend_config={
                "client_resources": {"num_cpus": client_cpus(cfg), "num_gpus": sim.num_gpus_per_client},
                "init_args": init_args,
            },
        )
    finally:
        returned.set()
        flwr_log.removeFilter(_drop)
        if ray.is_initialized():  # interrupted before Flower's own teardown could stop it (Ray starting, say)
            ray.shutdown()


def _drop(record: logging.LogRecord) -> bool:
    return False


def end_client_calls(returned: threading.Event) -> None:
    """Kill the simulation's ClientApp actors once the ServerApp has ended, until the simulation has returned.

    Flower's Simulation Engine (flwr 1.42) waits for each ClientApp call in a pool thread, with ``ray.get`` and no
    timeout, and joins that pool before it stops its actors and Ray. A client still working when the ServerApp ends
    (a round that timed out waiting for it, a ServerApp that failed mid-round) therefore kept ``fedmem run`` waiting
    forever after its failure was recorded. No reply is wanted once the ServerApp has ended: a killed actor ends its
    call as an error at once, and Flower's own teardown (its actors, then Ray) runs as after any run. The actors
    Flower is still starting then (Ray's start can outlast a short round) are killed as they appear: their pool
    would still pick up the round's messages. Flower keeps its actor pool in a local variable, so the actors are
    found as the handles this process holds; on an attached cluster only this run's actors are killed."""
    name, killed = ClientAppActor.__ray_metadata__.class_name, set()
    while True:
        for handle in [o for o in gc.get_objects() if issubclass(type(o), ray.actor.ActorHandle)]:
            if handle not in killed and handle._ray_actor_creation_function_descriptor.class_name == name \
                    and ray.is_initialized():
                # a handle left from an earlier simulation in this process is another Ray session's: not this run's
                with contextlib.suppress(ray.exceptions.ActorHandleNotFoundError):
                    ray.kill(handle)
                killed.add(handle)
        if returned.wait(0.5):
            return
