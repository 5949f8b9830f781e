"""`fedmem run resume=DIR`: a run killed with SIGKILL during round 2 continues after its last complete round and
ends with the same adapters and figures as an uninterrupted run of the same seed."""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from safetensors.torch import load_file

from bench.staging import left, start, watch
from tests.conftest import FAST, RUN_MARK, alive, ray_processes, run_mark

RUN = [*FAST, "strategy.num_rounds=3", "audit.methods=[utility,pa]", "audit.pa.c=16"]


def _fedmem(*args, **kwargs):
    return [sys.executable, "-m", "fedmem.cli", *args]


def _report(run, r):
    return json.loads((run / f"round_{r}" / "report.json").read_text())


@pytest.mark.slow
def test_a_run_killed_in_round_2_resumes_to_the_uninterrupted_result(tmp_path, cache_dir, ended):
    mark = run_mark()
    env = {**os.environ, "FEDMEM_CACHE": cache_dir, RUN_MARK: mark}
    common = [*RUN, f"cache_dir={cache_dir}"]
    full, killed = tmp_path / "full", tmp_path / "killed"
    # the uninterrupted run first, then the one killed: side by side, two Ray instances starting on a machine that
    # other tests load could miss Ray's 30 s start timeout, and the suite's cores are busy either way
    uninterrupted = ended(start(["run", *common, f"hydra.run.dir={full}"], env, tmp_path / "full.log"))
    assert uninterrupted.wait(timeout=600) == 0, (tmp_path / "full.log").read_text()[-2000:]

    proc = ended(start(["run", *common, f"hydra.run.dir={killed}"], env, tmp_path / "killed.log"))
    started = watch(proc, lambda: (killed / "round_1" / "report.json").is_file())
    os.killpg(proc.pid, signal.SIGKILL)  # the whole process group: driver, Ray and its workers
    proc.wait(timeout=60)
    assert not left(started), f"the killed run left processes behind: {left(started)}"
    assert json.loads((killed / "status.json").read_text())["status"] == "running"  # nothing marked it finished
    assert not (killed / "summary.json").exists()

    resumed = subprocess.run(_fedmem("run", f"resume={killed}"), env=env, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming" in resumed.stdout and "after round 1" in resumed.stdout
    status = json.loads((killed / "status.json").read_text())
    assert status["status"] == "finished"
    for r in range(4):
        a, b = load_file(str(full / f"round_{r}/adapter/adapter_model.safetensors")), \
            load_file(str(killed / f"round_{r}/adapter/adapter_model.safetensors"))
        assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a), f"round {r}: adapters differ"
        assert _report(full, r)["audit"] == _report(killed, r)["audit"], f"round {r}: audit figures differ"
        assert _report(full, r)["train"] == _report(killed, r)["train"], f"round {r}: training logs differ"
    curves = lambda run: json.loads((run / "summary.json").read_text())["curves"]  # noqa: E731
    assert curves(full) == curves(killed)

    # the two finished runs' Ray processes end within a minute of them (its agents outlive the raylet a while)
    assert not left(alive(ray_processes(mark)), seconds=60), "a finished run left Ray processes behind"
    again = subprocess.run(_fedmem("run", f"resume={killed}"), env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "the run already finished" in again.stderr


def test_resume_refuses_what_it_cannot_continue(tmp_path):
    for args, message in [(["resume=" + str(tmp_path)], "not a fedmem run directory"),
                          (["resume=" + str(tmp_path), "seed=1"], "takes no other overrides")]:
        proc = subprocess.run(_fedmem("run", *args), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and message in proc.stderr


@pytest.mark.slow
def test_the_centralized_baseline_resumes_to_the_uninterrupted_result(tmp_path, cache_dir):
    """What a kill during epoch 2 leaves (epochs 0-1 written, status running, no summary) resumes to the figures
    and adapters of an uninterrupted centralized run of the same seed."""
    env = {**os.environ, "FEDMEM_CACHE": cache_dir}
    common = [*RUN, "strategy=centralized", "strategy.num_rounds=2", f"cache_dir={cache_dir}"]
    full, cut = tmp_path / "full", tmp_path / "cut"
    for run in (full, cut):
        subprocess.run(_fedmem("run", *common, f"hydra.run.dir={run}"), check=True, env=env, capture_output=True,
                       timeout=600)
    shutil.rmtree(cut / "round_2")
    (cut / "summary.json").unlink()
    (cut / "status.json").write_text(json.dumps({"status": "running", "rounds": 2}))

    resumed = subprocess.run(_fedmem("run", f"resume={cut}"), env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "after round 1" in resumed.stdout
    assert json.loads((cut / "status.json").read_text())["status"] == "finished"
    for r in range(3):
        a, b = (load_file(str(run / f"round_{r}/adapter/adapter_model.safetensors")) for run in (full, cut))
        assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a), f"epoch {r}: adapters differ"
        assert _report(full, r)["audit"] == _report(cut, r)["audit"], f"epoch {r}: audit figures differ"
        assert _report(full, r)["train"] == _report(cut, r)["train"], f"epoch {r}: training logs differ"
