"""The effective schema of a tabular source: the task's preset columns with the data config's overrides."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Schema:
    columns: dict  # template field -> column (dotted paths allowed)
    client_column: str | None
    client_groups: dict  # name -> {"any"/"all"/"none": [...]}; {} = one client per distinct value
    group_by: str  # tags | keywords
    tag_separator: str | None
    label_column: str | None
    partition: str
    labels: tuple[str, ...]


def resolve_schema(task, data) -> Schema:
    """``data.*`` overrides ``task.*``. A data-level client column comes with its own groups (default: one client
    per distinct value), because the task's groups describe the hub dataset's values, not the user's column. A
    partition column left unset is not refused here (``unset_columns``): where the table can be read, the loader
    names it beside every other missing column, with the value this table would take."""
    foreign = sorted(set(data.columns) - set(task.fields))
    if foreign:
        raise ValueError(f"data.columns sets {', '.join(foreign)}, which task={task.name} does not have (its fields: "
                         f"{', '.join(task.fields)}): set task= to the task whose template has them (task=text takes "
                         "one text per row), or name the task's own fields")
    columns = {**task.columns, **data.columns}
    if data.client_column:
        client_column = data.client_column
        client_groups = data.client_groups or {}
    else:
        client_column = task.client_column
        client_groups = task.client_groups if data.client_groups is None else data.client_groups
    group_by = data.group_by or task.group_by
    label_column = data.label_column or task.label_column
    if task.partition == "natural" and client_groups and data.num_clients > len(client_groups):
        raise ValueError(
            f"data.num_clients={data.num_clients} but the natural partition defines only {len(client_groups)} "
            f"client groups {sorted(client_groups)}; lower data.num_clients or use task.partition=iid / dirichlet"
        )
    return Schema(
        columns=columns,
        client_column=client_column,
        client_groups=client_groups,
        group_by=group_by,
        tag_separator=task.tag_separator if not data.client_column else None,
        label_column=label_column,
        partition=task.partition,
        labels=tuple(task.labels),
    )


def unset_columns(schema: Schema) -> list[str]:
    """The columns the partition needs that no setting names, one line each (none, the empty list)."""
    problems = []
    if schema.partition == "natural" and not schema.client_column:
        problems.append("task.partition=natural needs a client column: set data.client_column (or "
                        "task.client_column), or use task.partition=iid / dirichlet")
    if schema.partition == "dirichlet" and not schema.label_column:
        problems.append("task.partition=dirichlet needs a label column: set data.label_column (or "
                        "task.label_column)")
    return problems
