"""Hugging Face and local-file sources: table -> rendered records -> client partitions -> train/test splits."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from fedmem.data import partition
from fedmem.data.grouping import assign_groups
from fedmem.data.hub import FILE_SUFFIXES, load_table
from fedmem.data.records import ClientSplit, FederatedData, Record
from fedmem.data.schema import Schema, resolve_schema, unset_columns
from fedmem.data.seeding import rng_for
from fedmem.data.templates import one_line, render_record


def _column(ds, name: str, what: str) -> list[Any]:
    """A column's values; class-label ids become their names."""
    from datasets import ClassLabel

    if name not in ds.column_names:
        raise ValueError(
            f"{what}: column {name!r} not found; the data has columns {sorted(ds.column_names)}: set it to one of "
            f"them (nested fields are reached with dots, e.g. context.contexts)"
        )
    values = ds.with_format("arrow")[name].to_pylist()  # one Arrow conversion, not a Python loop over rows
    feature = ds.features.get(name)
    if isinstance(feature, ClassLabel):
        values = [None if v is None or v < 0 else feature.int2str(int(v)) for v in values]
    return values


class DataRefused(ValueError):
    """Settings this table cannot take, one line each, with the values it would take (``fits``: data settings; None
    where some line has no single value): the preflight tries them, so that one refusal names every setting to
    change."""

    def __init__(self, problems: list[str], fits: dict[str, Any] | None):
        super().__init__("; ".join(problems))
        self.fits = fits


def _column_problems(ds, schema: Schema, task, data) -> tuple[list[str], dict[str, Any] | None]:
    """(every column the settings name that the table lacks, and every column the partition needs that no setting
    names, one line each with the value this table would take; those values as data settings, None where some line
    has no single one). Candidates are read from the columns' distinct values: a text column's are mostly distinct,
    a client or label column's few."""
    have = list(ds.column_names)
    if all(schema.columns[f] in have for f in task.fields) and all(
            c in have for c in (schema.client_column, schema.label_column) if c) and not unset_columns(schema):
        return [], None
    distinct = {c: len({one_line(v) for v in _column(ds, c, c)}) for c in have}
    mapped = {schema.columns[f] for f in task.fields if schema.columns[f] in have}
    named = mapped | {c for c in (schema.client_column, schema.label_column, data.id_column) if c in have}
    texts = [c for c in have if c not in named and distinct[c] > ds.num_rows // 2]
    groups = [c for c in have if c not in named and 2 <= distinct[c] <= max(2, ds.num_rows // 5)]
    problems, fits = [], {}
    missing = [f for f in task.fields if schema.columns[f] not in have]
    if missing:
        wanted = ", ".join(f"data.columns.{f}: column {schema.columns[f]!r} not found" for f in missing)
        line = f"{wanted} (task={task.name}'s field{'s' * (len(missing) > 1)}); the data has columns {sorted(have)}"
        if len(missing) == len(texts) == 1:
            fits["columns"] = {**data.columns, missing[0]: texts[0]}
            line += f": set data.columns={{{','.join(f'{k}:{v}' for k, v in fits['columns'].items())}}}"
        else:
            fits = None
            line += (f": set data.columns={{{','.join(f'{f}:COLUMN' for f in missing)}}} from {texts or sorted(have)}"
                     " (nested fields are reached with dots, e.g. context.contexts)")
            if len(texts) < len(missing) and task.name != "text":
                line += (f", or task=text, which reads one text per row ({len(texts)} column of mostly distinct text "
                         "here)")
        problems.append(line)
    partition_columns = (("natural", "client_column", "client column", "client"),
                         ("dirichlet", "label_column", "label column", "label"))
    for kind, key, what, each in partition_columns:
        column = getattr(schema, key)
        if schema.partition != kind or (column and column in have):
            continue
        where = "data" if getattr(data, key) or not column else "task"
        head = (f"{where}.{key}={column}: column {column!r} not found" if column
                else f"task.partition={kind} needs a {what}")
        if not groups:
            fits = None
            problems.append(f"{head}, and no column of the data ({', '.join(sorted(have))}) holds 2 to "
                            f"{max(2, ds.num_rows // 5)} distinct values: use task.partition=iid")
            continue
        best = (min(groups, key=lambda c: (abs(distinct[c] - data.num_clients), c)) if each == "client"
                else groups[0])
        setting = {key: best}
        if each == "client" and distinct[best] != data.num_clients:
            setting["num_clients"] = distinct[best]
        if fits is not None:
            fits.update(setting)
        others = [f"{c} ({distinct[c]})" for c in groups if c != best]
        problems.append(f"{head}: set {' '.join(f'data.{k}={v}' for k, v in setting.items())} (its {distinct[best]} "
                        f"distinct values, one {each} each{'; also possible: ' + ', '.join(others) if others else ''})"
                        ", or use task.partition=iid")
    return problems, fits


def row_ids(ds, data) -> list[str]:
    """Each row's id: ``data.id_column``'s value, or ``row<i>``. Duplicate or empty ids are an error naming the
    rows, since reports and the ground truth name rows by their id."""
    if not data.id_column:
        return [f"row{i}" for i in range(ds.num_rows)]
    ids = [one_line(v) for v in _column(ds, data.id_column, "data.id_column")]
    where = data.path or "the dataset"
    first: dict[str, int] = {}
    for i, v in enumerate(ids):
        if not v:
            raise ValueError(f"data.id_column={data.id_column!r}: row {i} of {where} has no id")
        if v in first:
            raise ValueError(f"data.id_column={data.id_column!r}: id {v!r} appears in rows {first[v]} and {i} of "
                             f"{where}; ids must be unique")
        first[v] = i
    return ids


def canonical_label(value: Any, labels: tuple[str, ...]) -> str | None:
    """``value`` as spelled in the label set (case-insensitive; a missing plural 's' is tolerated)."""
    s = one_line(value)
    if not labels:
        return s or None
    upper = {lab.upper(): lab for lab in labels}
    return upper.get(s.upper()) or upper.get(s.upper() + "S")


def _labels(ds, schema: Schema) -> list[str | None]:
    """Every row's label (None without a label column), spelled as in ``task.labels`` when a set is given."""
    if not schema.label_column:
        return [None] * ds.num_rows
    raw = _column(ds, schema.label_column, "label column")
    labels = [None if v is None else canonical_label(v, schema.labels) for v in raw]
    unknown = sorted({one_line(r) for r, lab in zip(raw, labels) if r is not None and lab is None})
    if unknown:
        raise ValueError(f"task.labels {list(schema.labels)} does not contain the label(s) {unknown[:10]}")
    return labels


def _partition(ds, schema: Schema, rows: list[int], labels: list, task, data, seed: int
               ) -> tuple[list[list[int]], list[str]]:
    """(row numbers per client, client names) for the usable ``rows``."""
    L = data.num_clients
    if schema.partition == "natural":
        values = _column(ds, schema.client_column, "client column")
        values = [values[i] for i in rows]
        if schema.client_groups:
            ids: list[Any] = assign_groups(values, schema.client_groups, schema.group_by, schema.tag_separator)
            names = list(schema.client_groups)[:L]
        else:
            ids = [one_line(v) or None for v in values]
            names = sorted({x for x in ids if x is not None})
        parts = partition.natural(ids, L)
    elif schema.partition == "dirichlet":
        parts = partition.dirichlet([labels[i] for i in rows], L, task.dirichlet_alpha, seed)
        names = [f"client{j}" for j in range(L)]
    else:
        parts = partition.iid(len(rows), L, seed)
        names = [f"client{j}" for j in range(L)]
    return [[rows[k] for k in part] for part in parts], [str(n) for n in names]


TRUE_VALUES = ("true", "1", "yes", "y", "public")


def public_is_file(public: str) -> bool:
    """``data.public`` names a file (or glob / directory) rather than a column of the data."""
    return "/" in public or "*" in public or public.lower().endswith(FILE_SUFFIXES)


def read_public_file(task, data, schema: Schema, cache_dir: str | None) -> list[str]:
    """The texts of a public-corpus file: its memorization-text column, or its ``text`` column."""
    ds = load_table(task, data, cache_dir, path=data.public, key="data.public")
    column = schema.columns[task.mem_field]
    if column not in ds.column_names:
        column = "text"
    texts = [one_line(v) for v in _column(ds, column, f"data.public ({data.public})")]
    texts = [t for t in texts if t]
    if not texts:
        raise ValueError(f"data.public {data.public!r}: column {column!r} holds no text")
    return texts


def public_texts(rec: Record) -> list[str]:
    """What a public row adds to the public corpus: its memorization text and (unless it is a label) its
    assistant turn, so the tokenizer and prior see both sides of the task."""
    return [rec.mem_text] + ([rec.assistant] if rec.assistant and rec.label is None else [])


def take_public_share(parts: list[list[int]], names: list[str], data, seed: int) -> tuple[list[list[int]], list[int]]:
    """Move a seeded ``data.public_share`` of each client's rows to the public corpus, before the train/test
    split, so they are never trained on as client data nor audited. Returns (remaining parts, public rows)."""
    kept, public = [], []
    need = data.train_per_client + data.test_per_client
    for c, rows in enumerate(parts):
        k = round(data.public_share * len(rows))
        chosen = set(rng_for(seed, "public", c).sample(rows, k))
        rest = [r for r in rows if r not in chosen]
        if len(rows) >= need > len(rest):  # the share made the shortfall (else the split says so)
            raise ValueError(
                f"data.public_share={data.public_share} moves {k} of client {names[c]!r}'s {len(rows)} rows to the "
                f"public corpus, leaving {len(rest)} for data.train_per_client + data.test_per_client = {need}: "
                f"lower data.public_share or the split sizes, or name a public corpus with data.public"
            )
        kept.append(rest)
        public.extend(sorted(chosen))
    return kept, public


MEMBERSHIP_VALUES = ("train", "test", "public")


def _membership(ds, data, rows: list[int]) -> dict[int, str]:
    """Each usable row's value in ``data.membership_column`` (train / test / public, any case); another value is an
    error naming the row."""
    values = _column(ds, data.membership_column, "data.membership_column")
    out = {}
    for i in rows:
        v = one_line(values[i]).lower()
        if v not in MEMBERSHIP_VALUES:
            raise ValueError(f"data.membership_column={data.membership_column!r}: row {i} holds {values[i]!r}; "
                             f"each row must be one of {', '.join(MEMBERSHIP_VALUES)}")
        out[i] = v
    return out


def _split_by_membership(rows: list[int], membership: dict[int, str], data, rng, client) -> tuple[list, list]:
    """A client's train and test rows drawn (seeded) from its rows marked train and test; too few of either is an
    error naming both numbers."""
    train = [i for i in rows if membership[i] == "train"]
    test = [i for i in rows if membership[i] == "test"]
    for what, have, want, key in (("train", train, data.train_per_client, "data.train_per_client"),
                                  ("test", test, data.test_per_client, "data.test_per_client")):
        if len(have) < want:
            raise ValueError(f"client {client!r} has {len(have)} rows marked {what} in data.membership_column, "
                             f"fewer than {key} = {want}: lower it")
    return rng.sample(train, data.train_per_client), rng.sample(test, data.test_per_client)


def load_tabular(task, data, seed: int, cache_dir: str | None = None) -> FederatedData:
    """The federated dataset from the task's Hugging Face dataset or from ``data.path``.

    Record ids are ``data.id_column``'s values, or ``row<i>`` with ``i`` the row number in the loaded table, so a
    split can be traced back to the file.
    """
    schema = resolve_schema(task, data)
    ds = load_table(task, data, cache_dir)
    problems, fits = _column_problems(ds, schema, task, data)
    if problems:  # every one at once, each with what this table takes
        raise DataRefused(problems, fits)
    ids = row_ids(ds, data)
    fields, labels = _fields(ds, schema, task)
    usable = _usable_rows(ds, schema, fields, labels)
    n_usable, n_usable_rows = len(usable), set(usable)
    public_file = bool(data.public) and public_is_file(data.public)
    public_rows: list[int] = []
    if data.public and not public_file:  # a column marks the public rows
        public_rows, usable = _public_column_rows(ds, data, usable)
    membership = _membership(ds, data, usable) if data.membership_column else None
    if membership is not None:  # the data says which rows are public
        public_rows = [i for i in usable if membership[i] == "public"]
        usable = [i for i in usable if membership[i] != "public"]
    parts, names = _partition(ds, schema, usable, labels, task, data, seed)
    sizes = [len(p) for p in parts]
    if not data.public and membership is None and data.public_share > 0:
        parts, public_rows = take_public_share(parts, names, data, seed)
    record = partial(_record, task, fields, ids, labels)
    clients, truth_clients = _client_splits(parts, names, sizes, membership, data, seed, ids, record)
    for entry, dropped in zip(truth_clients, _empty_per_client(ds, schema, n_usable_rows, names)):
        entry["rows_dropped_empty"] = dropped
    truth = {
        "source": data.source,
        "dataset": data.path or task.hf_dataset,
        "hf_config": None if data.path else task.hf_config,
        "hf_split": None if data.path else task.hf_split,
        "task": task.name,
        "seed": seed,
        "partition": schema.partition,
        "dirichlet_alpha": task.dirichlet_alpha if schema.partition == "dirichlet" else None,
        "client_column": schema.client_column if schema.partition == "natural" else None,
        "rows": ds.num_rows,
        "rows_dropped_empty": ds.num_rows - n_usable,
        "rows_in_no_client": len(usable) - sum(sizes),
        # where each row's membership (trained on or not) comes from: the data's own column, or fedmem's split
        "membership": ({"source": "column", "column": data.membership_column} if membership is not None
                       else {"source": "split", "seed": seed}),
        "public": _public_truth(data, public_file, public_rows, ids),
        "clients": truth_clients,
        "canaries": [],
        "boilerplate": [],
    }
    if public_file:
        public = read_public_file(task, data, schema, cache_dir)
    else:
        public = [t for i in public_rows for t in public_texts(record(i, None))]
    truth["public"]["texts"] = len(public)
    return FederatedData(clients=clients, public_corpus=public, ground_truth=truth, source=data.source)


def _fields(ds, schema: Schema, task) -> tuple[dict[str, list[Any]], list[str | None]]:
    """(every template field's column values, every row's label)."""
    fields = {f: _column(ds, schema.columns[f], f"data.columns.{f} (task={task.name}'s field {f})") for f in task.fields}
    labels = _labels(ds, schema)
    if schema.labels:  # the assistant turn shows the label as the task spells it
        for f in task.fields:
            if schema.columns[f] == schema.label_column:
                fields[f] = labels
    return fields, labels


def _usable_rows(ds, schema: Schema, fields: dict[str, list[Any]], labels: list[str | None]) -> list[int]:
    """The rows whose template fields are all non-empty (and, for Dirichlet, that have a label)."""
    usable = [i for i in range(ds.num_rows) if all(one_line(values[i]) for values in fields.values())]
    if schema.partition == "dirichlet":
        usable = [i for i in usable if labels[i] is not None]
    if not usable:
        raise ValueError(f"no usable rows: every row has an empty field among {list(fields)}")
    return usable


def _empty_per_client(ds, schema: Schema, usable: set[int], names: list[str]) -> list[int | None]:
    """Per client, the rows of its own that were dropped for an empty field: known where the client column names a
    row's client (a natural partition without groups), None elsewhere (the row never reached a client)."""
    if schema.partition != "natural" or schema.client_groups:
        return [None] * len(names)
    values = _column(ds, schema.client_column, "client column")
    dropped = [one_line(values[i]) for i in range(ds.num_rows) if i not in usable]
    return [sum(v == name for v in dropped) for name in names]


def _public_column_rows(ds, data, usable: list[int]) -> tuple[list[int], list[int]]:
    """(public rows, remaining usable rows) as the ``data.public`` column marks them; both must be non-empty."""
    flags = _column(ds, data.public, "data.public")
    public_rows = [i for i in usable if one_line(flags[i]).lower() in TRUE_VALUES]
    rest = [i for i in usable if one_line(flags[i]).lower() not in TRUE_VALUES]
    if not public_rows or not rest:
        raise ValueError(f"data.public: column {data.public!r} marks {len(public_rows)} of {len(usable)} usable "
                         f"rows as public (true/1/yes/public); both sides must be non-empty")
    return public_rows, rest


def _record(task, fields: dict[str, list[Any]], ids: list[str], labels: list[str | None], i: int, c: int | None
            ) -> Record:
    """Row ``i`` rendered as a record of client ``c`` (None: the public corpus)."""
    return render_record(task.user_template, task.assistant_template, task.mem_field,
                         {f: values[i] for f, values in fields.items()}, ids[i], client=c, label=labels[i])


def _client_splits(parts: list[list[int]], names: list[str], sizes: list[int], membership: dict[int, str] | None,
                   data, seed: int, ids: list[str], record: Callable[[int, int | None], Record]
                   ) -> tuple[list[ClientSplit], list[dict[str, Any]]]:
    """(each client's train/test records, each client's ground-truth entry). Clients that own fewer rows than the
    split asks for are named together, with sizes that fit the smallest of them."""
    need = data.train_per_client + data.test_per_client
    if membership is None and (short := [(names[c], len(rows)) for c, rows in enumerate(parts) if len(rows) < need]):
        fewest = min(n for _, n in short)
        if fewest < 2:  # one row to train on and one held out is the least a client can have
            raise DataRefused([f"{', '.join(f'client {n!r} owns {k} row' + 's' * (k != 1) for n, k in short if k < 2)}"
                               f": a client needs at least 2 rows (one to train on, one held out); leave it out "
                               f"with data.client_groups or choose another data.client_column"], None)
        test = max(1, fewest * data.test_per_client // need)
        raise DataRefused([f"data.train_per_client + data.test_per_client = {data.train_per_client} + "
                            f"{data.test_per_client}, but "
                            f"{', '.join(f'client {n!r} owns {k} rows' for n, k in short)}: set "
                            f"data.train_per_client={fewest - test} data.test_per_client={test} (the fewest rows, "
                            "split as asked)"], {"train_per_client": fewest - test, "test_per_client": test})
    clients, truth_clients = [], []
    for c, rows in enumerate(parts):
        if membership is None:
            train, test = partition.split_train_test(rows, data.train_per_client, data.test_per_client,
                                                     rng_for(seed, "split", c), names[c])
        else:
            train, test = _split_by_membership(rows, membership, data, rng_for(seed, "split", c), names[c])
        clients.append(ClientSplit(train=[record(i, c) for i in train], test=[record(i, c) for i in test]))
        truth_clients.append({"client": c, "name": names[c], "rows_in_partition": sizes[c],
                              "rows_to_public": sizes[c] - len(rows),
                              "train_ids": [ids[i] for i in train], "test_ids": [ids[i] for i in test]})
    return clients, truth_clients


def _public_truth(data, public_file: bool, public_rows: list[int], ids: list[str]) -> dict[str, Any]:
    """The ground truth's public entry: where the public corpus comes from and which rows it took."""
    return {
        "source": ("file" if public_file else "column") if data.public else ("share" if public_rows else None),
        "file": data.public if public_file else None,
        "column": data.public if data.public and not public_file else None,
        "share": None if data.public else data.public_share,
        "rows": len(public_rows),
        "row_ids": [ids[i] for i in public_rows],
    }
