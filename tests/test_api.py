"""fedmem from Python, as a notebook uses it (a script run as one): a small experiment run with the command line's
overrides, its figures and MR matrix read as DataFrames, a re-audit, and a two-point sweep's tables."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from bench.staging import FAST, fedmem_env


def test_a_notebook_runs_a_small_experiment_and_reads_its_figures_as_dataframes(tmp_path, cache_dir):
    script = textwrap.dedent(f"""
        import json
        import fedmem.api as fm

        fast = {FAST!r} + ["cache_dir={cache_dir}", "strategy=centralized", "audit.methods=[utility,mr]"]
        run = fm.run(*fast, run_dir="{tmp_path / 'run'}")
        figures = fm.figures(run)
        assert list(figures.index) == [0, 1], figures.index
        assert {{"mr/excess_intra", "mr/excess_intra_lo", "mr/excess_intra_hi", "utility/rouge_l"}} <= set(figures)
        summary = json.loads((run / "summary.json").read_text())
        assert figures.loc[1, "mr/intra"] == dict(map(tuple, summary["curves"]["mr/intra"]))[1]
        matrix = fm.mr_matrix(run, 1)
        assert matrix.shape == (2, 2) and matrix.index.name == "prefixes of"
        again = fm.audit(f"run={{run}}", "rounds=1", "audit.methods=[utility]", "name=again")
        assert (again / "round_1" / "report.json").is_file()
        try:
            fm.run("strategy.num_round=1")
        except ValueError as e:
            assert "did you mean strategy.num_rounds" in str(e)
        else:
            raise AssertionError("a misspelt key went through")
        print("ok", figures.shape)
        """)
    done = subprocess.run([sys.executable, "-c", script], env=fedmem_env(cache_dir), capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1].startswith("ok"), done.stderr[-3000:]
