"""The audit interface: what every memorization method sees and returns.

An audit *method* (MR, PEARL, Prior-Aware, utility) is a small class registered by name. It is built once per
run (so it can build indexes and load helper models once) and called once per audited round with a
:class:`AuditedModel`. Methods never call the model directly: they ask the round context for generations and
log-probabilities, which are memoised per round, so two methods asking for the same prompts share one pass
(the lm-evaluation-harness idea, kept small).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import numpy as np

from fedmem.audit.training_context import TrainingFrame
from fedmem.common import registry
from fedmem.common.fields import build_section
from fedmem.common.progress import progress_bar
from fedmem.data.config import TaskConfig
from fedmem.engine.config import Decoding

if TYPE_CHECKING:
    from fedmem.engine.scoring import TokenStats


@dataclass(frozen=True)
class AuditSample:
    """One training or test sample, prepared for auditing.

    The memorization text (SPEC §2) is tokenized; its first ``prefix_len`` tokens are the prefix p and all the
    rest the suffix s (SPEC §3). ``prompt_ids`` is the context the audits continue p in: the chat template's header
    followed by p's own ids, the user turn left open (the bare prefix for plain text), ready to feed to
    ``generate``. ``full_prompt_ids`` is the whole instruction up to the assistant header, which utility answers.

    ``train_context_ids`` and ``train_suffix_ids`` are the same prefix and suffix as the model saw them in training
    (SPEC §6): literal slices of the record's trained ids, the context being everything up to and including the
    prefix's tokens in that sequence (template and instruction included), ``train_prefix_text`` the characters those
    tokens cover (``fedmem.audit.training_context``). Empty for a sample not built from a record.
    """

    id: str  # stable across rounds, e.g. "c0/train/17"
    client: int
    split: str  # "train" | "test"
    prompt_ids: tuple[int, ...]
    prefix_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]
    prefix_text: str
    suffix_text: str
    reference: str = ""  # the assistant turn (for utility)
    label: str | None = None  # classification label, if any
    tags: dict[str, Any] = field(default_factory=dict)  # ground truth: {"canary": id, "copies": n, "generic": bool}
    full_prompt_ids: tuple[int, ...] = ()  # the whole user turn and the assistant header, for utility generation
    train_context_ids: tuple[int, ...] = ()  # the trained ids up to the prefix's end
    train_suffix_ids: tuple[int, ...] = ()  # the trained ids of the rest of the memorization text
    train_prefix_text: str = ""  # the memorization text's characters the trained prefix tokens cover
    train_cut: int = 0  # suffix tokens training never saw: it cut the record at model.max_seq_len before them

    @property
    def trained_suffix_len(self) -> int:
        """How many of the suffix's tokens training saw (all of them unless it cut the record)."""
        return max(0, len(self.suffix_ids) - self.train_cut)

    def scored_in(self, context: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(context ids, suffix ids) to score the suffix in: ``train``, the training sequence up to the prefix's end
        and the suffix as trained; ``prompt``, MR's prompt (``prompt_ids``) and ``suffix_ids``. Either way the suffix
        stops where training cut the record (``train_cut``): a token the model never trained on says nothing of what
        it memorized."""
        if context == "prompt":
            return self.prompt_ids, self.suffix_ids[: self.trained_suffix_len]
        return self.train_context_ids, self.train_suffix_ids

    def prefix_text_in(self, context: str) -> str:
        """The prefix's text as it stands at the end of ``scored_in(context)``'s context."""
        return self.prefix_text if context == "prompt" else self.train_prefix_text


@dataclass
class AuditPool:
    """Everything fixed for the whole run: the audited samples (same every round), sizes, tokenizer, config."""

    train: dict[int, list[AuditSample]]  # client -> sampled train samples (fixed per run)
    test: dict[int, list[AuditSample]]  # client -> sampled test samples (known non-members)
    train_sizes: dict[int, int]  # client -> |D_j| (full train split size, for the MR weights)
    tokenizer: Any
    decoding: Decoding
    prefix_len: int
    prompt_header: tuple[int, ...]  # the ids every prompt starts with: the open user turn's header (or nothing)
    seed: int
    ground_truth: dict[str, Any] = field(default_factory=dict)  # synthetic source: canaries etc.
    reveal_text: bool = False  # SPEC §8: excerpts are redacted unless explicitly allowed
    task_config: TaskConfig | None = None  # metric choices, labels
    public_texts: tuple[str, ...] = ()  # the data source's public corpus (the tiny base's pretraining text), if any
    # client -> ids of its common draw, the ordinary train samples every method audits (fedmem.audit.pool)
    common_draw: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # one train record's rendering around its memorization text: other text in the training context, for
    # Prior-Aware's generic calibration sequences; None without records
    train_frame: TrainingFrame | None = None
    # client -> every memorization text of its training split (not only the pooled ones): shared passages are found
    # over all of them (SPEC §3b); empty for a pool built without its data (the pooled texts stand in)
    training_texts: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # client -> how many of its held-out texts were left out of the test pool as training text (SPEC §3b)
    heldout_trained: dict[int, int] = field(default_factory=dict)
    # client -> how many of its training texts were left out of the train pool as training text of another client or
    # the public share: the same rule on both arms (SPEC §3b)
    train_elsewhere: dict[int, int] = field(default_factory=dict)
    # client -> {split: pooled samples whose suffix training cut at the trained length} (SPEC §6)
    cut_at_trained_length: dict[int, dict[str, int]] = field(default_factory=dict)
    # client -> {split: {reason: records}}: what of a split no draw can take, by reason (``fedmem.audit.pool.left_out``)
    left_out: dict[int, dict[str, dict[str, int]]] = field(default_factory=dict)

    def prompt_context(self, prefix_ids) -> tuple[int, ...]:
        """A prefix in the audits' prompt context (the open user turn), for text that is not an audited sample's
        (Prior-Aware's generic calibration pairs)."""
        return self.prompt_header + tuple(prefix_ids)

    @property
    def clients(self) -> list[int]:
        return sorted(self.train)

    @property
    def client_names(self) -> dict[int, str]:
        """Each client's name for the reports: the data's own (a specialty, a partition group), else its number."""
        named = {c.get("client"): str(c["name"]) for c in self.ground_truth.get("clients", []) if c.get("name")}
        return {c: named.get(c, str(c)) for c in self.clients}

    def redact(self, text: str) -> str:
        """Text for a report: itself only with ``reveal_text``, else a short hash and the length."""
        if self.reveal_text:
            return text
        import hashlib

        return f"<redacted sha256:{hashlib.sha256(text.encode()).hexdigest()[:12]} len={len(text)}>"


class RoundNotKept(LookupError):
    """A round's global adapter that the audited model cannot reach: the run did not keep it, or the audit has no run
    (a model audited alone)."""


class RoundArchive(Protocol):
    """What a run kept of its rounds beyond the audited model (``fedmem.experiment.archive``): the global adapter of
    every saved round, each client's update of a round while the run keeps them (the adapter the client sent the
    server), and each round's canary release along the client-level audit's directions where the run has canary
    clients. Only the audited model reads it, for the methods that look past one round (``AuditedModel``)."""

    def global_adapter(self, round_: int) -> dict | None: ...

    def canary_projections(self, round_: int) -> dict | None: ...

    def client_updates(self, round_: int) -> dict[int, dict] | None: ...

    def update_bytes(self, round_: int) -> int: ...

    @property
    def keeps_updates(self) -> bool: ...


@dataclass
class AuditedModel:
    """One audited model at one round. Generation and scoring are memoised here and shared by methods."""

    pool: AuditPool
    round: int
    model: Any  # a causal LM (peft-wrapped or merged), in eval mode
    label: str = "fl"  # "fl" or "cl"
    out_dir: str | None = None  # round_<r>/ directory: methods may write compact side files here (atomically)
    batch_size: int = 32  # sequences per scoring batch
    generation_batch_size: int | None = None  # sequences in flight while generating (None: sized by the model)
    generation_backend: str = "fedmem"  # fedmem's decoding loop, or transformers' generate
    merge_adapter: bool = True  # generate and score on a copy with the LoRA adapter merged (the same function)
    _merged: Any = field(default=None, repr=False)
    show_progress: bool = False  # a progress bar per stage of the audit (stderr, cleared when the stage ends)
    archive: RoundArchive | None = None  # the run's other rounds and clients' updates (None: this model alone)
    budget: float | None = None  # the accountant's ε for this model (DP-FedAvg), beside which ε estimates are read
    _gen_cache: dict = field(default_factory=dict, repr=False)
    _prior_cache: dict = field(default_factory=dict, repr=False)
    _stats_cache: dict = field(default_factory=dict, repr=False)
    _other_cache: dict = field(default_factory=dict, repr=False)  # scores under other rounds' and clients' adapters
    passes: dict = field(default_factory=dict)  # memoised request kind -> passes it made over the model

    @property
    def computing_model(self):
        """The model that generation and scoring run on: the audited model, or (``merge_adapter``) a copy of it
        with its LoRA adapter merged into the weights (``fedmem.engine.model.load.merged_copy``), built once per round.
        Methods that need the adapter itself (switching it off for the base) use ``model``."""
        if not self.merge_adapter:
            return self.model
        if self._merged is None:
            from fedmem.engine.model.load import merged_copy

            self._merged = merged_copy(self.model)
        return self._merged

    def generate(
        self,
        prompts: list[tuple[int, ...]],
        max_new_tokens: int,
        num_samples: int = 1,
        decoding: Decoding | None = None,
        seed: int | None = None,
    ) -> list[list[list[int]]]:
        """Continuation token ids: result[i][r] is the r-th sample for prompts[i] (prompt not included).

        Memoised on the full request, so a second method asking the same thing gets the same outputs.
        """
        from fedmem.engine.generation import generate_batched

        decoding = decoding or self.pool.decoding
        seed = self.pool.seed + 1000 * self.round if seed is None else seed
        key = (tuple(prompts), max_new_tokens, num_samples, decoding, seed)
        each = "" if num_samples == 1 else f" ({num_samples} per prompt)"
        return self._memo(self._gen_cache, key, "generate", len(prompts), f"generating{each}", lambda advance: (
            generate_batched(self.computing_model, self.pool.tokenizer, prompts, max_new_tokens=max_new_tokens,
                             num_samples=num_samples, decoding=decoding, seed=seed,
                             batch_size=self.generation_batch_size, progress=advance,
                             backend=self.generation_backend)))

    def logprobs(self, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> np.ndarray:
        """log P(s | p) for each (p, s) pair, teacher-forced: the sum of :meth:`token_stats`' per-token log P, so a
        pair that any method has had scored this round is not scored again."""
        return np.array([stats.logp.sum() for stats in self.token_stats(pairs)], dtype=np.float64)

    def token_stats(self, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> list[TokenStats]:
        """Per suffix token of each (p, s) pair: log P(s_t | p, s_<t) and the mean and standard deviation of
        log p over the next-token distribution (``fedmem.engine.scoring.token_stats``), teacher-forced, memoised per pair:
        the pairs no method has had scored this round go through one pass, so the attacks and Prior-Aware, which
        score many of the same (prompt, suffix) pairs, share it."""
        from fedmem.engine.scoring import token_stats

        pairs = [(tuple(p), tuple(s)) for p, s in pairs]
        missing = [pair for pair in dict.fromkeys(pairs) if pair not in self._stats_cache]
        if missing:
            with self.progress(len(missing), "scoring per-token statistics") as bar:
                scored = token_stats(self.computing_model, missing, self.batch_size, bar.advance)
            self._stats_cache.update(zip(missing, scored))
            self.passes["token_stats"] = self.passes.get("token_stats", 0) + 1
        return [self._stats_cache[pair] for pair in pairs]

    def prior_logprobs(self, prefixes: list[tuple[int, ...]], suffixes: list[tuple[int, ...]]) -> np.ndarray:
        """log P(s_j | q_i) for every prior prefix q_i and suffix s_j, shape [len(prefixes), len(suffixes)],
        memoised (each prefix's KV cache serves all suffixes: ``fedmem.engine.scoring.prior_logprobs``)."""
        from fedmem.engine.scoring import prior_inputs, prior_logprobs

        rows, cols = prior_inputs(prefixes, suffixes)
        return self._memo(self._prior_cache, (tuple(prefixes), tuple(suffixes)), "prior_logprobs",
                          len(rows) * len(cols), "scoring prior log P(s|q)",
                          lambda advance: prior_logprobs(self.computing_model, prefixes, suffixes, self.batch_size,
                                                         advance))

    def base_logprobs(self, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> list[np.ndarray] | None:
        """Per-token log P(s_t | p, s_<t) of each pair under the audited model's base, its LoRA adapter switched off
        (a reference model that saw none of the clients' data); None for a model without an adapter."""
        from peft import PeftModel

        from fedmem.engine.scoring import token_logprobs

        if not isinstance(self.model, PeftModel):
            return None
        with self.model.disable_adapter(), self.progress(len(pairs), "scoring the base (reference)") as bar:
            out = token_logprobs(self.model, pairs, self.batch_size, bar.advance)
        self.passes["base_logprobs"] = self.passes.get("base_logprobs", 0) + 1
        return out

    def other_model_logprobs(self, path: str, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]
                             ) -> list[np.ndarray]:
        """Per-token log P(s_t | p, s_<t) of each pair under the causal LM in directory ``path`` (the same tokenizer's
        ids), loaded beside the audited model for this call, then released."""
        from transformers import AutoModelForCausalLM

        from fedmem.engine.scoring import token_logprobs

        like = next(self.model.parameters())
        model = AutoModelForCausalLM.from_pretrained(path, dtype=like.dtype).to(like.device).eval()
        try:
            with self.progress(len(pairs), "scoring the reference model") as bar:
                return token_logprobs(model, pairs, self.batch_size, bar.advance)
        finally:
            del model

    def global_logprobs(self, round_: int, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]
                        ) -> list[np.ndarray]:
        """Per-token log P(s_t | p, s_<t) of each pair under the global model of round ``round_``: this round's (the
        audited model) or another the run saved (its adapter on this base, from the archive). Every round is scored
        the same way, one pass over the pairs in their order on a model carrying that round's adapter, so its
        numbers do not depend on which round asked for them (a trajectory built round by round, resumed or
        re-audited is the same); memoised per round."""
        from fedmem.engine.scoring import token_logprobs

        pairs = [(tuple(p), tuple(s)) for p, s in pairs]
        if round_ == self.round:
            build = lambda: self.computing_model  # noqa: E731
        else:
            state = self.archive.global_adapter(round_) if self.archive is not None else None
            if state is None:
                raise RoundNotKept(f"round {round_}'s global adapter is not at hand")
            build = lambda: self._carrying(state)  # noqa: E731
        return self._memo(self._other_cache, ("global", round_, tuple(pairs)), "global_logprobs", len(pairs),
                          f"scoring round {round_}'s global model",
                          lambda advance: token_logprobs(build(), pairs, self.batch_size, advance))

    def client_logprobs(self, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]
                        ) -> dict[int, list[np.ndarray]] | None:
        """``{client: per-token log P(s_t | p, s_<t) of each pair}`` under each client's local model of this round
        (the adapter it sent the server: the round's starting global adapter plus its update), for every client whose
        update the run kept; None where it kept none (round 0, a centralized run, a model fedmem did not train). What
        the server sees, as source inference scores it; one pass per client, memoised."""
        from fedmem.engine.scoring import token_logprobs

        updates = self.archive.client_updates(self.round) if self.archive is not None else None
        if not updates:
            return None
        pairs = [(tuple(p), tuple(s)) for p, s in pairs]
        key = ("clients", tuple(pairs))
        if key not in self._other_cache:
            out = {}
            with self.progress(len(pairs) * len(updates), "scoring each client's local model") as bar:
                for client in sorted(updates):
                    out[client] = token_logprobs(self._carrying(updates[client]), pairs, self.batch_size,
                                                 bar.advance)
            self._other_cache[key] = out
            self.passes["client_logprobs"] = self.passes.get("client_logprobs", 0) + len(updates)
        return self._other_cache[key]

    def updates_on_disk(self) -> dict:
        """``{"bytes", "kept"}``: the bytes on disk of the clients' updates of this round, and whether they stay there
        once the round is audited (``audit.keep_updates``, or a re-audited run's)."""
        if self.archive is None:
            return {"bytes": 0, "kept": False}
        return {"bytes": self.archive.update_bytes(self.round), "kept": self.archive.keeps_updates}

    def _carrying(self, state: dict):
        """A copy of the audited model carrying another adapter, built as ``computing_model`` is (merged or not)."""
        from fedmem.engine.model.load import copy_with_adapter, merged_copy

        return merged_copy(self.model, state) if self.merge_adapter else copy_with_adapter(self.model, state)

    def global_adapter(self, server_round: int) -> dict | None:
        """The global LoRA adapter (its state dict) of round ``server_round`` of the audited run: this round's is the
        audited model's own, another is read back from the run's archive (None where the run did not keep it)."""
        from fedmem.engine.model.load import adapter_state

        if server_round == self.round:
            return adapter_state(self.model)
        return self.archive.global_adapter(server_round) if self.archive is not None else None

    def canary_projections(self, server_round: int) -> dict | None:
        """What the run kept of round ``server_round``'s release with its canary clients averaged in (the change
        along each direction, its norm, the release's noise; ``fedmem.experiment.archive``), None where it kept
        none: what the client-level audit reads in place of the global model."""
        return self.archive.canary_projections(server_round) if self.archive is not None else None

    def decoding_values(self) -> dict:
        """The decoding values generation uses for the run's preset on this model (its own generation config under
        the preset's knob; ``fedmem.engine.generation.decoding_used``)."""
        from fedmem.engine.generation import decoding_used

        return decoding_used(self.model, self.pool.decoding)

    def _memo(self, cache: dict, key, kind: str, total: int, desc: str, compute):
        """One memoised request: computed once per round behind a progress bar, its pass counted in ``passes``."""
        if key not in cache:
            with self.progress(total, desc) as bar:
                cache[key] = compute(bar.advance)
            self.passes[kind] = self.passes.get(kind, 0) + 1
        return cache[key]

    def decode(self, ids: list[int]) -> str:
        return self.pool.tokenizer.decode(ids, skip_special_tokens=True)

    def progress(self, total: int, desc: str):
        """A bar over one stage of a method's round (``with audited.progress(n, "mr retrieval") as bar:`` then
        ``bar.advance(k)``), shown only with ``show_progress``; it vanishes when the stage ends."""
        return progress_bar(total, f"  {desc}", self.show_progress)


@dataclass(frozen=True)
class Figure:
    """One headline figure a method declares: the console line, the pages, ``summary.json`` and the sweep tables show
    it from this declaration alone, so none of them needs to know the method.

    ``kind`` says how it reads: a ``rate`` (a fraction, shown in percent), a ``difference`` of two rates (percentage
    points, may be negative), a ``count`` (of ``of``, another headline key, when given), or a ``score`` (a number
    such as a ROC AUC). Its 95% interval, when it has one, sits in the headline under ``ci`` (``<key>_ci95`` unless
    said otherwise). ``memorization``: True when a higher value means more memorization, False when lower does, None
    for figures that measure something else (utility). ``console``: on the one line printed per round. ``sweep``:
    which columns of the sweep tables it fills: ``answer`` (the paper's MR comparison, every table but the
    framework's), ``total`` and ``utility`` (the framework table, the paper's Table 2), ``performance`` (the paper's
    "Performance" column: the first such figure a run has), ``extra`` (every table), or None (none). ``epsilon``: an
    empirical privacy figure in the accountant's units (ε at the run's δ), tabled and plotted beside DP's ε. ``mde``:
    the headline also carries ``<key>_mde``, the smallest true effect (away from ``null``: 0 for an excess, 0.5 for an
    AUC) the figure's test detects at the audit's own sizes (two-sided 5%, power 80%; docs/spec.md §12), shown as
    "under X" wherever the interval holds the null: an effect too small for this audit, not an absent one."""

    key: str
    label: str
    kind: Literal["rate", "difference", "count", "score"] = "rate"
    ci: str | None = ""
    memorization: bool | None = True
    console: bool = False
    of: str | None = None
    sweep: Literal["answer", "total", "utility", "performance", "extra"] | None = "extra"
    epsilon: bool = False
    mde: bool = False
    null: float = 0.0

    @property
    def mde_key(self) -> str | None:
        return f"{self.key}_mde" if self.mde else None

    def __post_init__(self):
        if self.ci == "":
            object.__setattr__(self, "ci", None if self.kind == "count" else f"{self.key}_ci95")


class AuditMethod:
    """An audit method: a config class, ``audit(audited)`` per round, and optional hooks with neutral defaults.

    Nothing outside a method knows its internals: the auditor builds it from its validated ``Config``, calls
    ``audit`` once per round, scores ``truth_rows`` against the ground truth when the data has one, and calls
    ``close`` at the end of the run. Every section has the same outer shape (``config``, ``headline``, then the
    method's own figures; see ``fedmem/reports/report.schema.json``); ``figures`` declares the headline's figures, from which
    the console, the pages, ``summary.json`` and the sweep tables show them. How a section reads on a page (its
    Markdown, plots, the run page's answer) is its view's business (``fedmem.reports.views``): a method computes, imports no
    plotting library and renders nothing.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type] = dict
    title: ClassVar[str] = ""  # the section's heading in the human reports
    figures: ClassVar[tuple[Figure, ...]] = ()  # its headline figures, in the order they are shown
    size_keys: ClassVar[tuple[str, ...]] = ()  # the config keys that size its audit (the run page's configuration)
    # its model requests are its own (no other method asks for the same generation or scores): the auditor may run
    # it in the second lane, beside the others, with the same requests (``audit.concurrent``)
    runs_apart: ClassVar[bool] = False
    # compares the rows a model was trained on with rows it was not: an audit of a model fedmem did not train needs
    # the data to say which rows those are (data.membership_column)
    compares_members: ClassVar[bool] = False
    # scores each client's update of the audited round (``AuditedModel.client_logprobs``): a federated run keeps them
    # while the method is enabled, until their round is audited (``audit.keep_updates``: after the run too), and a
    # re-audit with it needs a run that kept them
    scores_updates: ClassVar[bool] = False

    def __init__(self, cfg: Any, pool: AuditPool):
        self.cfg = cfg
        self.pool = pool

    @classmethod
    def check(cls, cfg: Any, experiment: Any) -> None:
        """Checks of this method's config against the rest of the experiment (an ``ExperimentConfig``), run
        before anything is loaded or trained. Raise ValueError naming the key."""

    @classmethod
    def preflight(cls, cfg: Any) -> None:
        """Checks of what lies outside the config (a server the method needs), run once by the driver before a run
        directory exists, never in the clients. Raise ValueError naming the key."""

    @classmethod
    def samples_needed(cls, cfg: Any) -> dict[str, int]:
        """Prepared samples per client this method audits, by split ("train", "test"): the auditor refuses a
        config whose pool (``audit.samples_per_client``, ``audit.test_per_client``) is smaller."""
        return {}

    @classmethod
    def size_key(cls, split: str) -> str:
        """The config key that sets how many samples of ``split`` it audits per client (``samples_needed``), for
        the errors and ``audit.size=auto``."""
        return cls.size_keys[0] if cls.size_keys else "n"

    @classmethod
    def audited_train(cls, cfg: Any, pool: AuditPool) -> set[str] | None:
        """The ids of the train samples this method gives verdicts on (``verdicts``), chosen from ``run`` as its
        constructor chooses them; None for a method that decides nothing per train sample. The auditor refuses a
        config under which a method leaves out part of the common draw (``fedmem.audit.pool.check_common_draw``)."""
        return None

    @classmethod
    def check_pool(cls, cfg: Any, pool: AuditPool) -> None:
        """Checks of this method's draw against the pool the data gave (run by the preflight's plan, before
        anything is written). Raise ValueError naming the key and a value that works for this data."""

    @classmethod
    def min_suffix(cls, cfg: Any) -> int:
        """The fewest suffix tokens a train sample needs for this method to score it: the common draw takes only
        samples every enabled method can score."""
        return 0

    @classmethod
    def round_cost(cls, cfg: Any, clients: int) -> str:
        """The model work of one audited round for ``clients`` clients, in words (for the preflight summary)."""
        return ""

    def audit(self, audited: AuditedModel) -> dict[str, Any]:
        """Return this method's JSON-serialisable section of ``report.json`` for one round. Stage timings go under
        the key ``seconds`` ({stage: seconds}): the auditor moves them to the report's ``timings`` as
        ``<name>_stages``, so a section holds figures only and the same seed gives identical sections."""
        raise NotImplementedError

    def on_degenerate(self, reason: str) -> dict[str, Any]:
        """The section of a round whose global model has no usable next-token distributions (``reason``,
        ``fedmem.engine.health``): nothing measurable, said so, never a number (every figure None) or a crash."""
        from dataclasses import asdict, is_dataclass

        config = asdict(self.cfg) if is_dataclass(self.cfg) else dict(self.cfg or {})
        headline = {k: None for f in self.figures for k in (f.key, f.ci, f.mde_key) if k}
        return {"config": config, "headline": headline, "degenerate": reason,
                "note": f"Not measurable on a degenerate model: {reason}."}

    def truth_rows(self, section: dict[str, Any]) -> list[dict[str, Any]]:
        """Per-sample ``{"id", "tags", "split", "score", "decision"}`` of a section (score: higher means more
        memorized), for scoring against the synthetic ground truth (``fedmem.audit.truth``); empty for methods that
        decide nothing per sample."""
        return []

    def verdicts(self, section: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        """``{label: rows like truth_rows'}``: the per-sample decisions this method sets beside the other methods'
        (``fedmem.audit.agreement``); a method with several decision rules (attacks) gives one set each."""
        rows = self.truth_rows(section)
        return {self.name: rows} if rows else {}

    def close(self) -> None:
        """Release what the method holds beyond the run (e.g. the Elasticsearch indices it created)."""


AUDIT_METHODS: dict[str, type[AuditMethod]] = {}


def register(cls: type[AuditMethod]) -> type[AuditMethod]:
    """Class decorator: make an audit method available under ``cls.name`` to ``audit.methods``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} needs a non-empty name")
    return registry.add(AUDIT_METHODS, cls.name, cls, "audit method")


def declared_figures(methods: dict[str, Any] | None = None) -> dict[str, Figure]:
    """``{"<method>/<key>": Figure}``: the headline figures ``methods`` (name: class or instance) declare, every
    registered method's by default. The keys are those of ``summary.json``'s curves."""
    methods = AUDIT_METHODS if methods is None else methods
    return {f"{name}/{f.key}": f for name, m in methods.items() for f in m.figures}


def build_method_config(name: str, section: dict[str, Any] | None) -> Any:
    """One method's config section, validated (unknown keys, types, ``__post_init__`` checks)."""
    if name not in AUDIT_METHODS:
        raise ValueError(f"unknown audit method {name!r}; known: {sorted(AUDIT_METHODS)}")
    cls = AUDIT_METHODS[name].Config
    if cls is dict:
        return dict(section or {})
    return build_section(cls, section, f"audit.{name}")
