"""`fedmem run` (Flower's Simulation Engine in this process through `flwr.simulation.run_simulation`, which flwr
1.42 marks deprecated) against Flower's supported path, `flwr run` on a managed local SuperLink in simulation mode
(what `make flwr-run` does), on the same resolved config: wall time, the start-up each path adds beyond its rounds'
training and audits, and whether the two give the same figures.

    python bench/run_path.py [overrides...]

The in-process path runs twice, before and after the other (the first also builds the tiny base into the cache),
and the second is the one compared. The SuperLink runs from a Flower home of its own on free ports and is stopped at
the end (a managed SuperLink otherwise keeps running after its run).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMALL = ["model.tiny.vocab_size=512", "model.tiny.hidden_size=64", "model.tiny.intermediate_size=128",
         "model.tiny.num_hidden_layers=2", "model.tiny.num_attention_heads=4", "model.tiny.num_key_value_heads=2",
         "model.tiny.pretrain_epochs=1", "model.max_seq_len=128", "data.train_per_client=24", "data.test_per_client=6",
         "data.public_size=200", "data.canary_copies=[1,4]", "data.shared_canary_copies=[]", "audit.common_draw=2",
         "audit.prefix_len=16", "audit.samples_per_client=6", "audit.test_per_client=3", "audit.methods=[utility]",
         "audit.utility.n=2", "audit.utility.max_new_tokens=8", "train.progress=false", "strategy.num_rounds=2",
         "data.num_clients=2"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cmd: list[str], env: dict, cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def rounds_seconds(run: Path) -> float:
    """The seconds a run's rounds took: each round's training and audit, as its reports record them."""
    reports = [json.loads(p.read_text()) for p in run.glob("round_*/report.json")]
    return sum(r["timings"].get("round_training", 0) + r["timings"]["audit"] for r in reports)


def final_figures(run: Path) -> dict:
    return {k: v[-1] for k, v in json.loads((run / "summary.json").read_text())["curves"].items()}


def stop_managed_superlink(home: Path) -> None:
    """The SuperLink `flwr run` started detached, found by the log file under this bench's own Flower home."""
    import psutil

    for p in psutil.process_iter(["pid", "cmdline"]):
        if str(home) in " ".join(p.info["cmdline"] or []) and "flower-superlink" in " ".join(p.info["cmdline"]):
            os.kill(p.info["pid"], signal.SIGTERM)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="fedmem-run-path-"))
    home = work / "flwr-home"
    overrides = [*SMALL, f"cache_dir={REPO / '.cache' / 'fedmem'}", *sys.argv[1:]]
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "FLWR_HOME": str(home), "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
           "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()), "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1"}
    fedmem = [sys.executable, "-m", "fedmem.cli"]
    timed([*fedmem, "run", *overrides, f"hydra.run.dir={work / 'warm-up'}"], env, work)

    start = time.perf_counter()
    resolved = subprocess.run([*fedmem, "resolve", *overrides], env=env, cwd=work, check=True, capture_output=True,
                              text=True).stdout.strip().splitlines()[-1]
    clients = int(next(o.split("=")[1] for o in reversed(overrides) if o.startswith("data.num_clients=")))
    try:
        subprocess.run([sys.executable, "-m", "server.flwr_cli", resolved, "--", "--federation-config",
                        f"num-supernodes={clients}"], env=env, cwd=work, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    finally:
        stop_managed_superlink(home)
    supported_s, supported = time.perf_counter() - start, Path(resolved).parent

    in_process = work / "in-process"
    in_process_s = timed([*fedmem, "run", *overrides, f"hydra.run.dir={in_process}"], env, work)

    print(f"{'path':<34}{'wall s':>8}{'rounds s':>10}{'start-up s':>12}")
    for name, wall, run in (("fedmem run (run_simulation)", in_process_s, in_process),
                            ("flwr run, managed local SuperLink", supported_s, supported)):
        print(f"{name:<34}{wall:8.1f}{rounds_seconds(run):10.1f}{wall - rounds_seconds(run):12.1f}")
    print(f"supported / in-process wall time: {supported_s / in_process_s:.2f}x; start-up added: "
          f"{(supported_s - rounds_seconds(supported)) - (in_process_s - rounds_seconds(in_process)):+.1f} s")
    same = final_figures(in_process) == final_figures(supported)
    print(f"final figures identical: {same}")
    if not same:
        print(json.dumps({"in_process": final_figures(in_process), "supported": final_figures(supported)}, indent=1))


if __name__ == "__main__":
    main()
