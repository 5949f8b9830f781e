"""``fedmem`` command line.

    fedmem run [overrides]        one experiment (Flower simulation, or the centralized baseline)
    fedmem run -m [overrides]     a Hydra multirun sweep (ends with the sweep tables)
    fedmem resolve [overrides]    write the resolved config, for ``flwr run . --run-config "config-path='...'"``
    fedmem sweep-report DIR       (re)build the sweep tables of a finished sweep

The config is composed by Hydra from conf/, validated (every section and every enabled audit method) and
written to the run directory before anything is trained. The last line printed is the run directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

USAGE = __doc__.split("\n\n")[1]


def conf_dir() -> str:
    """conf/ of this checkout (editable install), or $FEDMEM_CONF."""
    env = os.environ.get("FEDMEM_CONF")
    if env:
        return str(Path(env).resolve())
    here = Path(__file__).resolve().parent.parent / "conf"
    if here.is_dir():
        return str(here)
    return str(Path.cwd() / "conf")


def compose_dict(overrides: list[str] | None = None) -> dict:
    """Compose conf/ with overrides into a plain dict (for tests and ``resolve``), no Hydra run dir."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides or []), return_hydra_config=False)
    d = OmegaConf.to_container(cfg, resolve=True)
    d.pop("hydra", None)
    return d


def _fail(msg: str) -> None:
    print(f"fedmem: invalid configuration: {msg}", file=sys.stderr)
    sys.exit(2)


def run_experiment(d: dict, run_dir: str) -> Path:
    """Validate, write the resolved config into ``run_dir``, then train and audit. Returns the run dir."""
    from fedmem.config import from_dict
    from fedmem.experiment import run_centralized, write_config

    d = {**d, "run_dir": run_dir}
    try:
        cfg = from_dict(d)
    except (ValueError, TypeError) as e:
        if Path(run_dir).is_dir() and not any(Path(run_dir).iterdir()):
            Path(run_dir).rmdir()  # Hydra made it before calling us: leave nothing behind
        _fail(str(e))
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    path = Path(run_dir) / "config.yaml"
    write_config(cfg, path)
    if cfg.strategy.name == "centralized":
        run_centralized(cfg)
    else:
        from server.simulation import simulate

        simulate(str(path))
    return Path(run_dir)


def _hydra_main(argv: list[str]) -> None:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    sweeps: set[str] = set()

    @hydra.main(config_path=conf_dir(), config_name="config", version_base="1.3")
    def task(cfg) -> None:
        d = OmegaConf.to_container(cfg, resolve=True)
        d.pop("hydra", None)
        hc = HydraConfig.get()
        if str(hc.mode) == "RunMode.MULTIRUN":
            sweeps.add(hc.sweep.dir)
        run_dir = run_experiment(d, hc.runtime.output_dir)
        print(run_dir, flush=True)

    sys.argv = [sys.argv[0], *argv]
    try:
        task()
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    for sweep in sorted(sweeps):
        from fedmem.sweep import write_sweep_report

        print(write_sweep_report(Path(sweep)), flush=True)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    cmd, rest = argv[0], argv[1:]
    if cmd == "run":
        _hydra_main(rest)
    elif cmd == "resolve":
        from fedmem.config import from_dict
        from fedmem.experiment import write_config

        out = Path("runs") / "resolved.yaml"
        try:
            cfg = from_dict(compose_dict(rest))
        except (ValueError, TypeError) as e:
            _fail(str(e))
        write_config(cfg, out)
        print(out.resolve())
    elif cmd == "sweep-report":
        from fedmem.sweep import write_sweep_report

        if not rest:
            _fail("sweep-report needs the sweep directory")
        print(write_sweep_report(Path(rest[0])))
    else:
        print(f"fedmem: unknown command {cmd!r}\n{USAGE}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
