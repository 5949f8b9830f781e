"""TaskConfig / DataConfig: presets, the conf/ YAML files, and one clear ValueError for every bad value."""

import dataclasses
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from fedmem.config.compose import compose_dict
from fedmem.data import (
    DATA_SOURCES,
    DataConfig,
    TaskConfig,
    check_configs,
    load_federated,
)

CONF = Path(__file__).resolve().parents[1] / "conf"


def _yaml(path: Path) -> dict:
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False)


@pytest.mark.parametrize("task", ["summarization", "dialog", "qa", "classification"])
def test_task_yaml_equals_the_preset_and_names_its_command(task):
    path = CONF / "task" / f"{task}.yaml"
    assert path.read_text().startswith("# fedmem run ")
    assert _yaml(path) == {"defaults": ["schema", "_self_"], "name": task}  # the preset lives in the code, once
    data = [] if task == "dialog" else ["data=hf"]
    assert TaskConfig(**compose_dict([f"task={task}", *data])["task"]) == TaskConfig(name=task)


@pytest.mark.parametrize("source", ["synthetic", "hf", "local"])
def test_data_yaml_builds(source):
    path = CONF / "data" / f"{source}.yaml"
    assert path.read_text().startswith("# fedmem run ")
    assert _yaml(path)["defaults"] == [f"{source}_schema", "_self_"]  # its source's settings and their defaults
    d = compose_dict([f"data={source}", *({"hf": ["task=qa"], "local": ["data.path=notes.csv"]}.get(source, []))])["data"]
    assert set(d) == {f.name for f in dataclasses.fields(DATA_SOURCES[source])}  # every setting can be overridden
    if d.get("path") == "???":  # mandatory: the user names the file
        d["path"] = "notes.csv"
    cfg = DataConfig(**d)
    assert cfg.source == source and cfg.num_clients == 3 and type(cfg) is DATA_SOURCES[source]


def test_the_default_data_are_the_synthetic_sources_defaults():
    assert DataConfig(**compose_dict([])["data"]) == DataConfig()


def test_a_setting_of_another_source_is_refused_by_name_unless_it_holds_that_sources_default():
    with pytest.raises(ValueError, match=r"data.canary_copies is not used by data.source=hf; it is a setting of "
                                         r"data.source=synthetic"):
        DataConfig(source="hf", canary_copies=[1, 2])
    # a config written when every source held every setting (a saved run's config.yaml) still reads
    assert DataConfig(path=None, columns={}, public_share=0.2) == DataConfig()


def test_presets_fill_only_what_is_left_none():
    qa = TaskConfig(name="qa", hf_config="pqa_labeled", columns={"question": "q", "context": "c", "answer": "a"})
    assert qa.hf_config == "pqa_labeled" and qa.columns == {"question": "q", "context": "c", "answer": "a"}
    assert qa.client_groups["humans_middle_aged"] == {"all": ["Humans", "Middle Aged"], "none": ["Animals"]}
    assert TaskConfig(name="classification").partition == "dirichlet"
    assert TaskConfig(name="classification").dirichlet_alpha == 5.0
    assert TaskConfig(name="dialog", client_groups={"a": ["x"], "b": ["y"]}).client_groups == {
        "a": {"any": ["x"]}, "b": {"any": ["y"]}}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "translation"}, "task.name: unknown task .translation.; known: .*dialog"),
        ({"partition": "random"}, "task.partition must be one of"),
        ({"metric": "bleu"}, "task.metric"),
        ({"pearl_metric": "bleu"}, "task.pearl_metric"),
        ({"dirichlet_alpha": 0.0}, "task.dirichlet_alpha"),
        ({"group_by": "regex"}, "task.group_by"),
        ({"user_template": "Answer this: {question}"}, r"must contain \{patient\}"),
        ({"assistant_template": "{doctor} ({specialty})"}, "no column for template field"),
        ({"assistant_template": "{doctor} {"}, "not a valid format string"),
        ({"client_groups": {"g": {"nonsense": ["x"]}}}, "task.client_groups.g"),
        ({"client_groups": {"g": {"none": ["x"]}}}, "'none' alone"),
        ({"name": "qa", "metric": "accuracy"}, "needs task.labels"),
        ({"client_column": "", "client_groups": {"g": ["x"]}}, "needs task.client_column"),
    ],
)
def test_bad_task_config_is_one_clear_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TaskConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"source": "web"}, "data.source: unknown source .web.; known: .*hf.*local.*synthetic"),
        ({"num_clients": 0}, "data.num_clients must be >= 1"),
        ({"train_per_client": 0}, "data.train_per_client"),
        ({"test_per_client": 0}, "data.test_per_client"),
        ({"source": "local"}, "needs data.path"),
        ({"source": "local", "path": "notes.xlsx"}, "data.path must be"),
        ({"path": "notes.csv"}, "not used by data.source=synthetic"),
        ({"canary_copies": [1, 0]}, "data.canary_copies"),
        ({"canary_copies": [2, 2]}, "data.canary_copies"),
        ({"canaries_per_count": -1}, "data.canaries_per_count"),
        ({"canary_clients": [3]}, "data.canary_clients"),
        ({"specialties": ["oncology"]}, "data.specialties"),
        ({"generic_fraction": 1.0}, "data.generic_fraction"),
        ({"num_boilerplates": 0}, "data.num_boilerplates"),
        ({"public_size": -1}, "data.public_size"),
        ({"source": "hf", "group_by": "fuzzy"}, "data.group_by"),
    ],
)
def test_bad_data_config_is_one_clear_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataConfig(**kwargs)


@pytest.mark.parametrize(
    "task, data, message",
    [
        (TaskConfig(name="qa"), DataConfig(), "use task=dialog"),
        (TaskConfig(name="dialog", assistant_template="{doctor}", user_template="{patient}", mem_field="patient"),
         DataConfig(), None),
        (TaskConfig(name="qa"), DataConfig(source="hf", num_clients=4), "defines only 3 client groups"),
        (TaskConfig(name="qa", client_column="", client_groups={}), DataConfig(source="hf"), "needs a client column"),
        (TaskConfig(name="qa", partition="dirichlet"), DataConfig(source="hf"), "needs a label column"),
    ],
)
def test_cross_config_checks_run_before_any_loading(task, data, message):
    if message is None:
        check_configs(task, data)  # a valid combination passes
        return
    with pytest.raises(ValueError, match=message):
        check_configs(task, data)
    with pytest.raises(ValueError, match=message):  # load_federated runs the same checks first
        load_federated(task, data, seed=0)
