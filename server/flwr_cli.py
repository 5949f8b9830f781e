"""An experiment through Flower's own CLI (the Deployment Engine, or its local simulation), stoppable from here.

    python -m server.flwr_cli <resolved config.yaml> [superlink] [-- extra `flwr run` options]

`make flwr-run` uses it. ``flwr run --stream`` only follows a run's logs: stopping that command leaves the run going
on the SuperLink. This wrapper starts the run, passes its logs through, and on Ctrl-C or SIGTERM asks the SuperLink
to stop the run (``flwr stop``) and marks the run directory's ``status.json`` stopped. A run that ended without
finishing (a round that failed: ``flwr run`` still exits 0) ends this command with exit code 1 and the reason, its
``status.json`` marked failed.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from fedmem.experiment.lifecycle import set_status, stop, unfinished

STARTED = re.compile(r"Successfully started run (\d+)")
REPO = Path(__file__).resolve().parents[1]


def _flwr() -> str:
    beside = Path(sys.executable).parent / "flwr"
    return str(beside) if beside.exists() else (shutil.which("flwr") or "flwr")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = argv[: argv.index("--")] if "--" in argv else argv
    if not 1 <= len(args) <= 2:
        print("usage: python -m server.flwr_cli <resolved config.yaml> [superlink] [-- flwr run options]",
              file=sys.stderr)
        return 2
    config, superlink = args[0], args[1:]
    resolved = yaml.safe_load(Path(config).read_text())
    run_dir = Path(resolved["run_dir"])
    cmd = [_flwr(), "run", str(REPO), *superlink, "--run-config", f"config-path='{Path(config).resolve()}'", *extra,
           "--stream"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def interrupted(signum, frame):
        raise KeyboardInterrupt

    # Installed explicitly: a process started in the background inherits SIGINT ignored, and Ctrl-C must still stop
    # the run rather than leave it going.
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    run_id = None
    try:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            match = STARTED.search(line)
            if match and run_id is None:
                run_id = match.group(1)
        code = proc.wait()
        problem = unfinished(run_dir) if code == 0 else None  # `flwr run` ends 0 whatever the ServerApp did
        if problem is None:
            return code
        set_status(run_dir, "failed", error=f"{type(problem).__name__}: {problem}")
        print(f"fedmem: run {run_id} failed: {problem}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the stop short
        stopped = False
        if run_id is not None:
            try:
                stopping = subprocess.run([_flwr(), "stop", run_id, *superlink], capture_output=True, text=True,
                                          timeout=60)
                stopped = stopping.returncode == 0
            except subprocess.TimeoutExpired:
                pass
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if stopped:  # marked as `fedmem run` marks a run stopped by Ctrl-C: the round reached, how to continue
            print(f"fedmem: run {run_id} {stop(run_dir, resolved['strategy']['num_rounds'])}", file=sys.stderr)
        else:
            print(f"fedmem: run {run_id} could not be stopped (try: flwr stop {run_id}); {run_dir}", file=sys.stderr)
        return 130 if stopped else 1


if __name__ == "__main__":
    sys.exit(main())
