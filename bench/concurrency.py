"""The default round's audit three ways, side by side in one process: one method after another; MR then Prior-Aware
in a thread beside the other methods (the lane as it ran before it had a process of its own); and as the default
does (``audit.concurrent``), that lane in a process of its own. For each, the audit's wall time, each method's
seconds, and the CPU time of this process and its helper processes over the wall time (how many of the cores the
audit kept busy); then whether the three audits' sections are identical. Each auditor audits round 0 first, untimed
(the lane's process starts then, once per run), and the round audited is timed.

    python bench/concurrency.py                              # a one-epoch adapter on the default data (cached)
    python bench/concurrency.py --run runs/<dir> --round 3   # a saved round of a run made with the default config
    python bench/concurrency.py audit.mr.n=300               # Hydra overrides of the audited config
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import psutil  # noqa: E402
from round import trained_adapter  # noqa: E402  (bench/round.py: the cached one-epoch adapter)

from fedmem.config.compose import compose_dict  # noqa: E402
from fedmem.config.experiment import from_dict  # noqa: E402
from fedmem.experiment.archive import saved_adapter  # noqa: E402
from fedmem.experiment.auditor import make_auditor  # noqa: E402


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its live children (the detector's spaCy helpers, the lane's
    process)."""
    me = psutil.Process()
    procs = [me, *me.children(recursive=True)]
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def audit(state: dict, overrides: list[str], concurrent: bool, process: bool = True) -> tuple[dict, float, float]:
    """(the round's report, wall seconds, CPU seconds) of one audit of ``state`` after an untimed one of round 0;
    ``process=False``: the second lane in a thread of this process."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = from_dict({**compose_dict([*overrides, f"audit.concurrent={concurrent}", "train.progress=false"]),
                         "run_dir": tmp})
        auditor = make_auditor(cfg, source={"kind": "bench"}, save_adapters=False)
        auditor.lane_process = process
        auditor.evaluate(0, auditor.initial_adapter())
        cpu, wall = cpu_seconds(), time.perf_counter()
        auditor.evaluate(1, state)
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu  # before finish: the lane's process is alive
        report = json.loads((Path(tmp) / "round_1" / "report.json").read_text())
        auditor.finish()
    return report, wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help="a run directory made with the default config (its saved adapter is audited)")
    ap.add_argument("--round", type=int, default=3, help="which saved round of --run")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of the audited config (default: none)")
    args = ap.parse_args()
    if args.run:
        state = saved_adapter(args.run, args.round)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            state = trained_adapter(from_dict({**compose_dict(args.overrides), "run_dir": tmp}))
    arms = [("one method after another", False, True),
            ("MR then Prior-Aware in a thread beside the others", True, False),
            ("MR then Prior-Aware in a process beside the others (default)", True, True)]
    rows, sections = [], []
    for name, concurrent, process in arms:
        report, wall, cpu = audit(state, args.overrides, concurrent, process)
        sections.append(report["audit"])
        t = report["timings"]
        methods = ", ".join(f"{m} {t[m]:.1f} s" for m in report["audit"])
        rows.append((name, wall, cpu, methods))
    print("| audit | wall (s) | CPU (s) | CPU / wall | per method |\n|---|---|---|---|---|")
    for name, wall, cpu, methods in rows:
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {cpu / wall:.2f} | {methods} |")
    print(f"\nwall time: one after another / process lane {rows[0][1] / rows[2][1]:.2f}x, thread lane / process lane "
          f"{rows[1][1] / rows[2][1]:.2f}x; the three audits' sections identical: "
          f"{sections[0] == sections[1] == sections[2]}")


if __name__ == "__main__":
    main()
