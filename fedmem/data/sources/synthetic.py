"""The synthetic source's settings (``conf/data/synthetic.yaml``): seeded clinical dialogs with planted canaries,
shared boilerplate and a public corpus, every one known (the generator: ``fedmem.data.synthetic``)."""

from __future__ import annotations

from dataclasses import dataclass

from fedmem.common.fields import option, option_factory
from fedmem.data.config import DataSourceConfig, TaskConfig, register_source
from fedmem.data.synthetic import make_synthetic
from fedmem.data.synthetic.vocab import BOILERPLATE

MAX_CANARIES = 512  # the canary name pool (32 x 32 name combinations, half of them canary-only, each used once)
SPECIALTY_NAMES = ("cardiology", "dermatology", "gastroenterology", "neurology", "pulmonology")


@register_source("synthetic")
@dataclass
class SyntheticConfig(DataSourceConfig):
    """How many dialogs, from which specialties, and what ground truth to plant."""

    # held-out records: MR's control draws 600 held-out prefixes per client (one per audited training prefix)
    test_per_client: int = option(600, "test samples per client (held-out records; MR's control and the data floor "
                                       "draw from them)")
    specialties: list[str] = option_factory(
        list(SPECIALTY_NAMES), "client j's clinical specialty is specialties[j] (cycled if fewer)")
    canary_copies: list[int] = option_factory([1, 2, 4, 8, 16], "the copy counts; each gets its own canaries")
    canaries_per_count: int = option(1, "canaries per copy count in every canary client")
    shared_canary_copies: list[int] = option_factory(
        [3, 6, 12, 24], "copy counts of shared canaries, one canary per count whose copies are dealt round-robin "
        "over the canary clients (the same record held by several clients); FedAvg averages a client's own canary "
        "with updates that never saw it, but every holder's update pushes a shared one"
    )
    canary_clients: list[int] | None = option(None, "the clients that receive canaries (None = all)")
    generic_fraction: float = option(
        0.05, "share of ordinary samples ending in shared boilerplate (a few percent: most patients write their own "
        "closing, few paste a stock paragraph)")
    num_boilerplates: int = option(4, "how many boilerplate closings the clients share")
    public_size: int = option(2000, "public-corpus paragraphs (tiny tokenizer and base-model prior)")
    public_generic_fraction: float = option(0.3, "share of public paragraphs ending in boilerplate")
    public_record_fraction: float = option(
        0.25, "share of public paragraphs that are record notes in the canary format, of other people")
    # the one-run privacy audit's canaries (docs/spec.md §10): the tiny model memorized none seen once in the default's
    # first two rounds, and those with four copies after one (docs/history.md)
    audit_canaries: int = option(
        128, "audit canaries m of the one-run privacy audit (audit.one_run): random word strings, each trained on (in "
             "one random client's training split) with probability 1/2; 0 = none")
    audit_canary_copies: int = option(4, "copies of a member audit canary in its client's training split")

    def __post_init__(self):
        super().__post_init__()
        self.specialties = [str(s) for s in self.specialties]
        unknown = [s for s in self.specialties if s not in SPECIALTY_NAMES]
        if not self.specialties or unknown:
            raise ValueError(f"data.specialties must name some of {list(SPECIALTY_NAMES)}, got {self.specialties}")
        self.canary_copies = [int(c) for c in self.canary_copies]
        if any(c < 1 for c in self.canary_copies) or len(set(self.canary_copies)) != len(self.canary_copies):
            raise ValueError(f"data.canary_copies must be distinct counts >= 1, got {self.canary_copies}")
        self.shared_canary_copies = [int(c) for c in self.shared_canary_copies]
        if any(c < 2 for c in self.shared_canary_copies) or len(set(self.shared_canary_copies)) != len(
                self.shared_canary_copies):
            raise ValueError(f"data.shared_canary_copies must be distinct counts >= 2, got {self.shared_canary_copies}")
        if self.canaries_per_count < 0:
            raise ValueError(f"data.canaries_per_count must be >= 0, got {self.canaries_per_count}")
        if self.canary_clients is not None:
            self.canary_clients = sorted({int(c) for c in self.canary_clients})
            bad = [c for c in self.canary_clients if not 0 <= c < self.num_clients]
            if bad or not self.canary_clients:
                raise ValueError(
                    f"data.canary_clients must list client indices in [0, {self.num_clients}), "
                    f"got {self.canary_clients}"
                )
        if not 0 <= self.generic_fraction < 1 or not 0 <= self.public_generic_fraction < 1:
            raise ValueError("data.generic_fraction and data.public_generic_fraction must be in [0, 1)")
        if not 0 <= self.public_record_fraction or self.public_generic_fraction + self.public_record_fraction >= 1:
            raise ValueError("data.public_record_fraction must be >= 0 and, with public_generic_fraction, below 1")
        if not 1 <= self.num_boilerplates <= len(BOILERPLATE):
            raise ValueError(f"data.num_boilerplates must be in [1, {len(BOILERPLATE)}], got {self.num_boilerplates}")
        if self.public_size < 0:
            raise ValueError(f"data.public_size must be >= 0, got {self.public_size}")
        if self.num_canaries() > MAX_CANARIES:
            raise ValueError(f"data: {self.num_canaries()} canaries requested, at most {MAX_CANARIES} (unique names)")
        most = max(self.canary_copies_by_client().values())
        if most >= self.train_per_client:
            raise ValueError(
                f"data: a canary client holds {most} canary copies (canaries_per_count x sum(canary_copies), plus "
                f"its share of shared_canary_copies), which must be fewer than "
                f"data.train_per_client={self.train_per_client}; raise train_per_client or plant fewer canaries"
            )

    @property
    def has_public_corpus(self) -> bool:
        return True  # it makes its own (public_size paragraphs)

    def check_task(self, task: TaskConfig) -> None:
        if task.name != "dialog":
            raise ValueError(
                f"data.source=synthetic generates clinical dialogs: use task=dialog (got task={task.name}), or "
                f"data=hf / data=local for task={task.name}"
            )
        if task.mem_field != "patient" or set(task.fields) - {"patient", "doctor"}:
            raise ValueError("data.source=synthetic fills the fields {patient} and {doctor} only; "
                             "task.user_template / assistant_template / mem_field must use just those")

    def load(self, task: TaskConfig, seed: int, cache_dir: str | None = None):
        return make_synthetic(task, self, seed)

    def canary_holders(self) -> list[int]:
        return list(range(self.num_clients)) if self.canary_clients is None else list(self.canary_clients)

    def num_canaries(self) -> int:
        return len(self.canary_copies) * self.canaries_per_count * len(self.canary_holders()) + len(
            self.shared_canary_copies)

    def shared_copy_clients(self, t: int) -> list[int]:
        """The client of each copy of shared canary number ``t``: round-robin over the canary clients, starting one
        further along for every canary so that the remainders do not all land on the first client."""
        holders = self.canary_holders()
        return [holders[(t + m) % len(holders)] for m in range(self.shared_canary_copies[t])]

    def canary_copies_by_client(self) -> dict[int, int]:
        """Canary copies (own and shared) in each client's train split."""
        out = {c: 0 for c in range(self.num_clients)}
        for c in self.canary_holders():
            out[c] += self.canaries_per_count * sum(self.canary_copies)
        for t in range(len(self.shared_canary_copies)):
            for c in self.shared_copy_clients(t):
                out[c] += 1
        return out
