"""Extending fedmem: a new audit method, data source, strategy (with a term in the clients' local loss) or task is one
module of its own (and its YAML). Each test registers a toy one from here, touches no other file, and checks that it
shows up everywhere a built-in one does."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

import numpy as np
import pytest

from fedmem.audit import AUDIT_METHODS, AuditedModel, AuditMethod, Figure, register
from fedmem.audit.intervals import rate
from fedmem.cli import main
from fedmem.common.fields import check_fields, option
from fedmem.data import DATA_SOURCES, TASKS
from fedmem.federation.strategies import STRATEGIES


@dataclass
class ConfidentConfig:
    n: int = option(4, "train samples audited per client")
    log10_p: float = option(-30.0, "a suffix is 'confident' when log10 P(s|p) of its first 16 tokens is above this")

    def __post_init__(self):
        check_fields(self, "audit.confident")


class Confident(AuditMethod):
    """A toy method: the share of audited training suffixes the model predicts above a likelihood threshold."""

    name = "confident"
    Config = ConfidentConfig
    title = "Confident suffixes"
    figures = (Figure("rate", "confident suffixes", console=True),
               Figure("confident", "confident", kind="count", of="audited", sweep=None))

    @classmethod
    def samples_needed(cls, cfg: ConfidentConfig) -> dict[str, int]:
        return {"train": cfg.n}

    def audit(self, audited: AuditedModel) -> dict:
        samples = [s for c in self.pool.clients for s in self.pool.train[c][: self.cfg.n]]
        log10_p = audited.logprobs([(s.prompt_ids, s.suffix_ids[:16]) for s in samples]) / np.log(10)
        k, n = int((log10_p > self.cfg.log10_p).sum()), len(samples)
        r = rate(k, n)
        return {"config": asdict(self.cfg), "headline": {"rate": r["rate"], "rate_ci95": r["ci95"],
                                                         "confident": k, "audited": n}}


@pytest.fixture
def confident():
    register(Confident)
    yield Confident
    AUDIT_METHODS.pop(Confident.name)


def test_a_new_audit_method_shows_on_the_console_both_pages_summary_and_sweep_tables(confident, full_run, capsys):
    run_dir, _ = full_run
    main(["audit", "-m", f"run={run_dir}", "name=confident", "audit.methods=[confident]",
          "audit.confident.log10_p=-1000,0"])  # everything confident, then nothing
    sweep = run_dir / "audits" / "confident"
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("fedmem: round")]
    assert len(lines) == 4 and all("  confident suffixes " in x for x in lines), err  # 2 jobs x rounds 0, 1

    for job, expected in (("0", 1.0), ("1", 0.0)):
        summary = json.loads((sweep / job / "summary.json").read_text())
        assert [v for _, v in summary["curves"]["confident/rate"]] == [expected, expected]
        assert [r for r, _, _ in summary["ci95"]["confident/rate"]] == [0, 1]
        report = json.loads((sweep / job / "round_1" / "report.json").read_text())
        audited = report["audit"]["confident"]["headline"]["audited"]
        assert audited == 4 * len(report["clients"])
        round_page = (sweep / job / "round_1" / "report.md").read_text()
        assert "## Confident suffixes (" in round_page and "| confident suffixes | " in round_page
        assert f"| confident | {int(expected * audited)} of {audited} |" in round_page
        assert "<h2>Confident suffixes" in (sweep / job / "round_1" / "report.html").read_text()
        run_page = (sweep / job / "report.md").read_text()
        assert "**Confident suffixes.** confident suffixes " in run_page  # the answer at the last round
        assert "| confident suffixes (`confident/rate`) | " in run_page  # the figures per round
        assert "panel_confident_0.png" in run_page and (sweep / job / "panel_confident_0.png").is_file()
        assert "| audit.confident | n 4 |" not in run_page  # declared no size keys: no configuration row

    tables = json.loads((sweep / "sweep_tables.json").read_text())
    [table] = tables["tables"].values()
    assert table["columns"] == {"confident/rate": "confident suffixes"}
    assert [row["figures"]["confident/rate"]["mean"] for row in table["rows"]] == [1.0, 0.0]
    assert "| confident suffixes |" in (sweep / "sweep_report.md").read_text().replace("n | confident", "| confident")


def test_a_new_methods_settings_compose_and_override_without_a_yaml_of_its_own(confident, compose):
    from fedmem.config.experiment import from_dict, method_configs

    cfg = from_dict(compose("audit.methods=[utility,confident]", "audit.confident.log10_p=-5"))
    assert method_configs(cfg)["confident"] == ConfidentConfig(log10_p=-5.0)


# ---------------------------------------------------------------- a data source, a strategy and a task of one's own

PLUGIN = '''
"""A data source, a strategy with a client-side term and a task of one's own: what a contributor writes (plus their
YAML)."""
import json
import os
from dataclasses import dataclass

import numpy as np
from flwr.serverapp.strategy import FedMedian

from fedmem.common.fields import option
from fedmem.data import ClientSplit, DataSourceConfig, FederatedData, Task, register_source, register_task
from fedmem.data.templates import Template, render_record
from fedmem.federation.strategies import Strategy, StrategyConfig, register_strategy

WORDS = "river stone lamp orchard winter harbor candle meadow copper violin lantern garden".split()


@register_source("toy_notes")
@dataclass
class ToyNotesConfig(DataSourceConfig):
    words_per_text: int = option(40, "words in each text")

    @property
    def has_public_corpus(self) -> bool:
        return True

    def load(self, task, seed, cache_dir=None):
        rng = np.random.default_rng(seed)

        def text(c):
            return f"note of client {c}: " + " ".join(rng.choice(WORDS, self.words_per_text))

        def record(c, split, i):
            return render_record(task.user_template, task.assistant_template, task.mem_field,
                                 {task.mem_field: text(c)}, f"c{c}-{split}{i}", client=c)

        clients = [ClientSplit([record(c, "train", i) for i in range(self.train_per_client)],
                               [record(c, "test", i) for i in range(self.test_per_client)])
                   for c in range(self.num_clients)]
        return FederatedData(clients, public_corpus=[text(-1) for _ in range(100)], source=self.source,
                             ground_truth={"clients": [{"client": c, "name": f"shelf {c}"}
                                                       for c in range(self.num_clients)]})


class CountingMedian(FedMedian):
    """FedMedian that notes every round it aggregates, with its own setting (so the test sees that it ran), and
    sends the clients the weight of their local term."""

    def __init__(self, tag, decay, **kwargs):
        super().__init__(**kwargs)
        self.tag, self.decay = tag, decay

    def configure_train(self, server_round, arrays, config, grid):
        config["toy-decay"] = self.decay
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        with open(os.environ["TOY_STRATEGY_LOG"], "a") as f:
            f.write(json.dumps({"round": server_round, "replies": len(replies), "tag": self.tag}) + "\\n")
        return super().aggregate_train(server_round, replies)


@dataclass
class ToyMedianConfig(StrategyConfig):
    tag: str = option("median", "written beside every aggregated round")
    decay: float = option(0.0, "weight of the clients' local term, decay * ||w||^2 (sent by the server)")


def toy_term(settings, sent):
    """decay * ||w||^2 over the LoRA weights, with the decay the server sent; each client notes that it got it."""
    decay = float(sent["toy-decay"])
    with open(os.environ["TOY_TERM_LOG"], "a") as f:
        f.write(json.dumps({"round": int(sent["server-round"]), "decay": decay}) + "\\n")
    return lambda params, start: decay * sum((p ** 2).sum() for p in params.values())


register_strategy(Strategy("toy_median", f"{__name__}:CountingMedian", ToyMedianConfig,
                           lambda s: {"tag": s.tag, "decay": s.decay}, local_term=toy_term))

# a task: recipes as running text, the whole recipe memorized, one client per kitchen
register_task(Task("toy_recipe", Template("Recipe. {steps}", "", "steps"), {"format": "plain"}))
'''


@pytest.fixture
def plugin_conf(tmp_path, monkeypatch):
    """The plugin module on the path of this process and of the Ray workers, and a config tree with its YAML."""
    import shutil
    import sys

    from fedmem.config.compose import conf_dir

    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "fedmem_toy_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path / "plugin"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path / "plugin"),
                                                                    os.environ.get("PYTHONPATH")])))
    conf = tmp_path / "conf"
    shutil.copytree(conf_dir(), conf)
    # like every preset, they extend their schema (the plugin's dataclass defaults) and list only their changes
    (conf / "data" / "toy_notes.yaml").write_text(
        "# fedmem run plugins=[fedmem_toy_plugin] data=toy_notes task=text\n"
        "defaults:\n  - toy_notes_schema\n  - _self_\nsource: toy_notes\ntrain_per_client: 24\ntest_per_client: 6\n")
    (conf / "strategy" / "toy_median.yaml").write_text(
        "# fedmem run plugins=[fedmem_toy_plugin] strategy=toy_median\n"
        "defaults:\n  - toy_median_schema\n  - _self_\nname: toy_median\nnum_rounds: 1\ntag: toy\ndecay: 0.5\n")
    (conf / "task" / "toy_recipe.yaml").write_text(
        "# fedmem run plugins=[fedmem_toy_plugin] task=toy_recipe\n"
        "defaults:\n  - schema\n  - _self_\nname: toy_recipe\n")
    monkeypatch.setenv("FEDMEM_CONF", str(conf))
    monkeypatch.setenv("TOY_STRATEGY_LOG", str(tmp_path / "strategy.jsonl"))
    monkeypatch.setenv("TOY_TERM_LOG", str(tmp_path / "term.jsonl"))
    yield tmp_path
    for name in [m for m in sys.modules if m == "fedmem_toy_plugin"]:
        sys.modules.pop(name)
    DATA_SOURCES.pop("toy_notes", None)
    STRATEGIES.pop("toy_median", None)
    TASKS.pop("toy_recipe", None)


def test_a_new_data_source_strategy_and_task_run_in_the_real_flower_simulation(plugin_conf, cache_dir):
    from fedmem.cli import run_experiment
    from fedmem.config.compose import compose_dict
    from tests.conftest import FAST, synthetic_only

    fast = [o for o in FAST if not synthetic_only(o)]  # the test-sized settings, the synthetic source's left out
    d = compose_dict([*fast, f"cache_dir={cache_dir}", "plugins=[fedmem_toy_plugin]", "data=toy_notes",
                      "data.num_clients=3", "task=toy_recipe", "strategy=toy_median", "audit.methods=[utility,mr]"])
    run = run_experiment(d, str(plugin_conf / "run"))

    report = json.loads((run / "round_1" / "report.json").read_text())
    assert report["strategy"] == "toy_median" and report["config"]["data"]["source"] == "toy_notes"
    assert report["config"]["data"]["words_per_text"] == 40  # the source's own setting, beside the shared ones
    assert [c["name"] for c in report["clients"]] == ["shelf 0", "shelf 1", "shelf 2"]
    assert [row["client"] for row in report["train"]] == [0, 1, 2]  # every client trained on the toy notes
    assert report["participation"]["trained"] == [0, 1, 2]
    assert "mr" in report["audit"] and report["audit"]["mr"]["headline"]["intra"] is not None
    log = [json.loads(x) for x in (plugin_conf / "strategy.jsonl").read_text().splitlines()]
    assert log == [{"round": 1, "replies": 3, "tag": "toy"}]  # the plugin's strategy aggregated, with its setting
    assert json.loads((run / "status.json").read_text())["status"] == "finished"
    assert "toy_median, 1 rounds, tag toy" in (run / "report.md").read_text()
    # the strategy's client-side term: every client built it from the decay the server sent
    assert [json.loads(x) for x in (plugin_conf / "term.jsonl").read_text().splitlines()] == [
        {"round": 1, "decay": 0.5}] * 3
    # the task: its template and preset in the resolved config, its text what the clients trained on
    assert report["task"] == "toy_recipe" and report["config"]["task"]["user_template"] == "Recipe. {steps}"
    assert report["config"]["task"]["format"] == "plain" and report["config"]["task"]["columns"] == {"steps": "steps"}
