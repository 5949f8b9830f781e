"""Run one experiment in Flower's Simulation Engine (Ray backend): the entry point ``fedmem run`` uses."""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
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
            server_app=make_server_app(cfg, start_round, on_end=server_ended,
                                       grid_view=lambda grid: UntilReturned(grid, returned)),
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


class SimulationEnded(RuntimeError):
    """The simulation returned while its ServerApp still waited on its clients."""


class UntilReturned:
    """The simulation's grid as the ServerApp's rounds see it: Flower's, except that a wait for nodes or replies
    ends once the simulation has returned. Flower starts the ServerApp's thread before Ray; should Ray then fail to
    start (a loaded machine's timeout, a cluster that does not answer), the simulation returns its error while that
    thread, which is no daemon, waits for replies that no client will send until the round's timeout (an hour by
    default), and the process, its failure recorded, cannot exit."""

    def __init__(self, grid, returned: threading.Event):
        self.grid, self.returned = grid, returned

    def _check(self) -> None:
        if self.returned.is_set():
            raise SimulationEnded("the simulation ended while the ServerApp waited for its clients")

    def get_node_ids(self):
        self._check()
        return self.grid.get_node_ids()

    def send_and_receive(self, messages, *, timeout: float | None = None):
        """Flower's in-memory ``send_and_receive`` (push, then pull until every reply is in or the timeout has
        passed), ending as soon as the simulation has returned."""
        pending = set(self.grid.push_messages(messages))
        deadline = None if timeout is None else time.monotonic() + timeout
        replies = []
        while pending and (deadline is None or time.monotonic() < deadline):
            self._check()
            got = list(self.grid.pull_messages(pending))
            replies += got
            pending -= {m.metadata.reply_to_message_id for m in got}
            if pending:
                time.sleep(self.grid.pull_interval)
        return replies

    def __getattr__(self, name):
        return getattr(self.grid, name)


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
