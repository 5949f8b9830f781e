"""Flower simulation round time vs the bare local training loop on the same steps (target overhead <= 15%).

    python bench/flower_overhead.py [--rounds 2] [--clients 2]

Both sides run the same clients' local training (same data, seeds, steps) one client at a time with the same
torch threads: Flower with one Ray actor holding all cores, the bare loop in this process. Audits are off, so
the Flower side's round time is training + Flower/Ray messaging + (de)serialising the adapter. Round 1 of the
Flower run includes loading the model in the actor, so the steady-state rounds (>= 2) are reported too.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from fedmem.cli import run_experiment
from fedmem.config.compose import compose_dict
from fedmem.config.experiment import from_dict
from fedmem.engine.model.load import adapter_state
from fedmem.experiment.loading import fresh_lora_model
from fedmem.experiment.training import client_round


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--train-per-client", type=int, default=120)
    args = ap.parse_args()
    threads = torch.get_num_threads()
    overrides = [
        f"strategy.num_rounds={args.rounds}", f"data.num_clients={args.clients}",
        f"data.train_per_client={args.train_per_client}", "audit.methods=[]", "train.progress=false",
        f"simulation.num_cpus_per_client={threads}", f"simulation.torch_threads={threads}",
    ]
    run_dir = Path(tempfile.mkdtemp(prefix="fedmem-bench-"))
    d = compose_dict(overrides)
    run_experiment(d, str(run_dir))
    flower = [json.loads((run_dir / f"round_{r}" / "report.json").read_text())["timings"]["round_training"]
              for r in range(1, args.rounds + 1)]

    cfg = from_dict({**d, "run_dir": str(run_dir)})
    model, _ = fresh_lora_model(cfg)
    state = adapter_state(model)
    bare = []
    for r in range(1, args.rounds + 1):
        t = time.perf_counter()
        states = [client_round(cfg, c, state, {"server-round": r})[0] for c in range(args.clients)]
        state = {k: sum(s[k] for s in states) / len(states) for k in state}
        bare.append(time.perf_counter() - t)
    steady_f, steady_b = sum(flower[1:]) or flower[0], sum(bare[1:]) or bare[0]
    print(f"torch threads {threads}; clients {args.clients}; rounds {args.rounds}")
    print("round   flower_s   bare_s   ratio")
    for r, (f, b) in enumerate(zip(flower, bare), 1):
        print(f"{r:5d}   {f:8.2f}   {b:6.2f}   {f / b:5.3f}")
    print(f"steady-state (rounds >= 2) flower/bare ratio: {steady_f / steady_b:.3f}  "
          f"(overhead {100 * (steady_f / steady_b - 1):+.1f}%, target <= +15%)")


if __name__ == "__main__":
    main()
