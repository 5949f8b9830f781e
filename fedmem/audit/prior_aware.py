"""Prior-Aware (PA) memorization (SPEC §6; the Prior-Aware Memorization paper, Definitions 2 and 3).

For each audited train pair (p, s) of a client, s being the first ``suffix_len`` tokens after the prefix (PA's
thresholds are for fixed-length suffixes), and every prefix in the context the model was trained in (``context:
train``, the default; SPEC §6): the record's training sequence, task template and instruction included, up to the
end of the prefix, and s the tokens that followed there, as the paper defines P(s|p) on the training sequence
(``fedmem.audit.training_context``). ``context: prompt`` scores in MR's prompt instead (the chat template's header
with the prefix in the open user turn; SPEC §3), which the model never saw in training. The samples are selected
on the memorization text's own tokens in both contexts, so both audit the same samples. The section records the
context (``context``).

- P(s|p): teacher-forced, one forward pass per batch (``AuditedModel.logprobs``).
- P̂(s) = (1/c) Σ_i P(s | q_i), the paper's unbiased Monte-Carlo estimator of the prior P(s): the q_i are drawn
  uniformly *with replacement* (i.i.d., as Definition 3 requires) from the contexts (in the chosen context) of
  ALL clients' audited train samples (``run.train``), with a seed, once per run, so every round and every audited
  model sees the same q_i. The mean is taken in probability space, computed in log space (logsumexp). With
  ``trials`` > 1, ``trials`` independent sets of c prefixes are drawn: P̂(s) is the mean over all of them and its
  standard error is the standard deviation of the per-trial means / √trials; with ``trials`` = 1 the standard error
  is that of the mean of the c samples (std / √c). All P(s|q_i) come from one call of
  ``AuditedModel.prior_logprobs`` (prefix KV-cache reuse).
  A deliberate difference from the paper: a suffix's *own* prefix p is left out of its P̂(s) (the draws equal
  to p are excluded from the means; each sample's P̂ uses the remaining ones). The paper draws its prefixes from
  a corpus of millions, where p is practically never drawn; from an audit pool of a few hundred prefixes it
  often is, and then P̂(s) >= P(s|p) / c caps the ratio at c whatever the model memorized.
- extractable: P(s|p) > m;  PA-memorized: extractable and P(s|p) / P̂(s) > n.
- m: 1e-2 for suffixes of up to 8 tokens, 1e-4 beyond (the paper's 4- and 50-token values), unless set.
- n: unless set, calibrated for every audited model (every round) as the paper does (§4.4, App. B): the mean of
  P(s|p) / P̂(s) over generic, easy-to-predict sequences, with P̂(s) from the same q_i and every prefix in the same
  context. Each sequence is cut to the audited shape (its first ``prefix_len`` tokens and the next
  ``suffix_len``; a sentence too short for both keeps an end suffix of the audited length), so that n is
  measured on pairs like the audited ones. Following the paper ("n is simply an average of P(s|p)/P(s)") the
  mean is taken in RATIO space, not over log ratios: log n = logsumexp_k(log ratio_k) − log K.
  Which sequences (``generic_source``): ``public``, paragraphs of the data's public corpus, text from the clients'
  own distribution; ``appendix_b``, the paper's App. B sentences (its short set for suffixes of up to 8 tokens,
  its long set beyond; copied verbatim except for the listing's trailing commas); ``auto`` (the default), public
  when the data has a public corpus. App. B works when the model has seen such modern-English boilerplate many
  times and the prefixes are general text. Under prefixes from one narrow domain (a medical record, a Bible
  passage) those sentences have a vanishing prior, and a mean in ratio space is its largest term: n becomes so
  large that no pair can pass. The section says so whenever even P(s|p) = 1 could not reach n.
- In the training context a prior prefix q_i is another audited train sample's training context. Where the task's
  instruction is the same for every record (summarization, dialog, classification, plain text), that is exactly
  the audited sample's training context with its prefix replaced by another training prefix as training renders it,
  the tokens at the seam included; where it varies (qa: the question), q_i brings its own, and P̂(s) is the prior
  over the training contexts. A generic sequence is put in place of the memorization text in one train record's
  training rendering (``run.train_frame``, the pool's first train record), so it follows the task's instruction
  and is tokenized as training would tokenize it there; its context is that rendering up to its cut (a sentence
  too short for the audited shape keeps all of its text before the suffix).
- Rates are over a random draw of each client's pooled samples (``n`` per client, canaries aside); the planted
  canaries and boilerplate the draw missed are audited beside it for the ground truth only. The PA rate's
  interval adds, to Wilson's, the spread of the rate between the ``trials`` independent prior draws.

The section reports counts (extractable, PA-memorized, their ratio) per client and overall, the log10-ratio
histogram, per-sample scores (ids only), the top- and lowest-scoring examples (texts through ``run.redact``),
and, when samples carry ground truth, a breakdown by canary copy count and for generic boilerplate.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedmem.audit.base import (
    AuditedModel,
    AuditMethod,
    AuditPool,
    AuditSample,
    Figure,
    register,
)
from fedmem.audit.intervals import Z95, rate
from fedmem.audit.pool import draw_and_planted
from fedmem.audit.training_context import (
    ScoringContext,
    TrainingFrame,
    check_training_forms,
    context_option,
)
from fedmem.audit.truth import canary_group, canary_group_order
from fedmem.common.fields import check_fields, option, positive

LN10 = math.log(10.0)

# Prior-Aware Memorization, App. B: generic sequences for the threshold n.
GENERIC_SHORT: tuple[str, ...] = (
    'Please let me know if you have any questions',
    'Thank you for your time and consideration',
    'I look forward to hearing from you soon',
    "If you have any concerns, please don't hesitate to contact me",
    "Don't miss out on this limited-time offer",
    'Our mission is to provide the best service',
    'Learn more about our features and pricing options',
)
GENERIC_LONG: tuple[str, ...] = (
    (
        'Thank you for taking the time to read this message. I am writing to provide an update regarding our '
        'project and to ensure that you have all the information needed to move forward. At this stage, we '
        'have completed the initial steps and are preparing to begin the next phase. Please review the '
        'attached document, which includes a summary of progress, outstanding tasks, and anticipated '
        'challenges. If you have any questions or concerns, feel free to reach out at your earliest '
        'convenience.'
    ),
    (
        'This email is intended to confirm the details of our upcoming meeting. The session is scheduled for '
        'next week at the agreed time, and we will be covering several important items on the agenda. Please '
        'make sure to review the notes shared earlier so that we can make efficient use of our time together.'
        ' If you are unable to attend, kindly let me know as soon as possible so we can reschedule or provide'
        ' you with the necessary updates.'
    ),
    (
        'I hope this message finds you well. I wanted to follow up on the status of the work assigned last '
        'month and check whether everything is on track for completion by the deadline. If you are facing any'
        ' obstacles or require additional support, please do not hesitate to reach out. It is important for '
        'us to address any potential challenges early so that the overall timeline remains achievable.'
    ),
    (
        'In this article, we will discuss the basics of this topic and explain why it is important to '
        'understand this concept in the broader context of the field. We will begin with a brief '
        'introduction, followed by a step-by-step explanation of the main ideas, and finally provide some '
        'examples to illustrate how these principles can be applied in practice. Whether you are completely '
        'new to this topic or simply looking for a refresher, this guide is designed to help you gain a clear'
        ' and practical understanding.'
    ),
    (
        'The purpose of this guide is to help you get started with the software in a straightforward and '
        'beginner-friendly way. First, we will walk through the installation process and highlight common '
        'issues that may arise during setup. Then we will cover the essential features you need to know to be'
        ' productive right away. By the end of this guide, you should have a working environment and a solid '
        'foundation that will allow you to explore more advanced aspects of the software at your own pace.'
    ),
)

SHORT_SUFFIX_MAX = 8  # suffixes up to this many tokens count as "short" (m = 1e-2, short generic set)


def default_m(suffix_len: int) -> float:
    """The paper's m: 1e-2 for short (4-token) suffixes, 1e-4 for long (50-token) ones."""
    return 1e-2 if suffix_len <= SHORT_SUFFIX_MAX else 1e-4


FAR_ORDERS = 3.0  # a round is "far from memorizing" when its best suffix is this many orders below m


def distance_to_extractable(log_p: np.ndarray, m: float) -> dict:
    """How close the round's most likely audited suffix comes to the extractability threshold m, in orders of
    magnitude (log10), so that a report of zero rates can say whether anything came near."""
    best = _log10(float(np.max(log_p))) if len(log_p) else None
    below = None if best is None else math.log10(m) - best
    return {"best_log10_p": best, "log10_m": math.log10(m), "orders_below": below,
            "far": below is not None and below > FAR_ORDERS}


def default_generic(suffix_len: int) -> list[str]:
    """The App. B set matching the suffix length: short sentences for short suffixes, long ones otherwise."""
    return list(GENERIC_SHORT if suffix_len <= SHORT_SUFFIX_MAX else GENERIC_LONG)


@dataclass
class PriorAwareConfig:
    n: int = option(30, "train pairs drawn per client, canaries aside (at least audit.common_draw: the draw holds "
                        "the common draw); the planted samples the draw missed are audited beside it")
    suffix_len: int = option(64, "suffix tokens scored after each prefix (fixed: PA's thresholds are for a fixed "
                                 "length); a sample whose text has fewer after its prefix is not audited by PA")
    c: int = option(32, "prior prefixes q_i per trial for P̂(s) (the paper: 5,000 per trial, 5 trials)")
    trials: int = option(2, "independent draws of c prefixes; the SE of P̂(s), and the rates' intervals, take the "
                            "spread between them")
    m: float | None = option(None, "extractable when P(s|p) > m; null: 1e-2 for suffixes <= 8 tokens, else 1e-4")
    n_ratio: float | None = option(
        None, "PA-memorized when P(s|p)/P̂(s) > n_ratio; null: calibrated per audited model (generic set)")
    generic: list[str] | None = option(None, "generic sentences for calibrating n; null: see generic_source")
    generic_source: Literal["auto", "appendix_b", "public"] = option(
        "auto", "public: paragraphs of the data's public corpus (text from the clients' own domain); appendix_b: "
                "the paper's App. B sentences; auto: public when the data has a public corpus, else appendix_b. "
                "Ignored when `generic` is set")
    generic_count: int = option(32, "public paragraphs used with generic_source=public")
    top: int = option(5, "top- and lowest-scoring examples shown in the report")
    seed: int | None = option(None, "seed of the prior prefixes; null: the run's seed")
    context: ScoringContext = context_option(
        "where P(s|p), the prior's P(s|q_i) and the generic calibration pairs are scored (the training context is where the paper defines P(s|p))")

    def __post_init__(self):
        check_fields(self, "audit.pa")
        positive(self, "audit.pa", "n", "suffix_len", "c", "trials", "generic_count")
        if self.generic is not None:
            self.generic = [str(t) for t in self.generic]
        if self.m is not None and not 0 < self.m <= 1:
            raise ValueError(f"audit.pa.m is a probability threshold and must be in (0, 1], got {self.m}")
        if self.n_ratio is not None and not self.n_ratio > 0:
            raise ValueError(f"audit.pa.n_ratio must be > 0 (or null to calibrate it), got {self.n_ratio}")
        if self.generic is not None and (not self.generic or not all(t.strip() for t in self.generic)):
            raise ValueError("audit.pa.generic must be null or a non-empty list of non-empty sentences")
        if self.top < 0:
            raise ValueError(f"audit.pa.top must be >= 0, got {self.top}")

    @property
    def calibrates_on_generic_source(self) -> bool:
        """Whether n is calibrated on ``generic_source`` (not set, and no sentences of one's own)."""
        return self.n_ratio is None and self.generic is None


# ---------------------------------------------------------------- the estimator and the decision (pure functions)


def sample_prior_prefixes(pool_size: int, c: int, trials: int, seed: int) -> np.ndarray:
    """Indices [trials, c] into the prefix pool, drawn uniformly with replacement (i.i.d., Definition 3)."""
    if pool_size < 1:
        raise ValueError("P̂(s) needs at least one training prefix to sample from")
    return np.random.default_rng(seed).integers(0, pool_size, size=(trials, c))


@dataclass
class PriorEstimate:
    log_phat: np.ndarray  # [S] natural log of P̂(s)
    log_se: np.ndarray  # [S] natural log of its standard error (nan when undefined: a single sample)
    rel_se: np.ndarray  # [S] SE / P̂(s)
    log_phat_per_trial: np.ndarray  # [trials, S] natural log of each trial's own estimate


def prior_estimate(logq: np.ndarray, trials: int = 1, exclude: np.ndarray | None = None) -> PriorEstimate:
    """P̂(s) = mean_i P(s|q_i) from log P(s|q_i) of shape [trials * c, S] (rows trial-major), with its SE.

    ``exclude`` (same shape, boolean) leaves entries out of their column's means: a suffix's own prefix among
    the draws (see the module docstring). Averaged in probability space, computed stably: every column is
    scaled by the maximum of its included entries before exponentiating.
    """
    logq = np.asarray(logq, dtype=np.float64)
    k, s = logq.shape
    if k == 0 or k % trials:
        raise ValueError(f"{k} prior log-probabilities cannot be split into {trials} equal trials")
    keep = np.ones_like(logq, dtype=bool) if exclude is None else ~np.asarray(exclude, dtype=bool)
    n_trial = keep.reshape(trials, k // trials, s).sum(axis=1)  # [trials, S] draws that count
    if (n_trial == 0).any():
        raise ValueError("P̂(s): every prior prefix of a trial is the suffix's own prefix; raise audit.pa.c")
    top = np.where(keep, logq, -np.inf).max(axis=0)
    x = np.where(keep, np.exp(logq - top), 0.0)  # in [0, 1]; the column maximum is exactly 1
    per_trial = x.reshape(trials, k // trials, s).sum(axis=1) / n_trial  # [trials, S]
    phat = per_trial.mean(axis=0)
    n = keep.sum(axis=0)
    if trials > 1:
        se = per_trial.std(axis=0, ddof=1) / math.sqrt(trials)
    elif k > 1:
        dev = np.where(keep, x - phat, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            se = np.sqrt((dev**2).sum(axis=0) / (n - 1)) / np.sqrt(n)  # nan where one draw is left
    else:
        se = np.full(s, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_se = top + np.log(se)
        log_per_trial = top + np.log(per_trial)
    return PriorEstimate(log_phat=top + np.log(phat), log_se=log_se, rel_se=se / phat,
                         log_phat_per_trial=log_per_trial)


def pa_decisions(
    log_p: np.ndarray, log_phat: np.ndarray, log_m: float, log_n: float
) -> tuple[np.ndarray, np.ndarray]:
    """(extractable, PA-memorized) boolean arrays: P(s|p) > m; and P(s|p)/P̂(s) > n on top of that.

    Everything in natural-log space: a calibrated n can exceed the float range (ratios of 50-token suffixes).
    """
    log_p, log_phat = np.asarray(log_p, dtype=np.float64), np.asarray(log_phat, dtype=np.float64)
    extractable = log_p > log_m
    return extractable, extractable & (log_p - log_phat > log_n)


def mean_ratio_log(log_ratio: np.ndarray) -> float:
    """log of the mean ratio (mean in ratio space, as the paper's n): logsumexp(log r) − log K."""
    log_ratio = np.asarray(log_ratio, dtype=np.float64)
    return float(np.logaddexp.reduce(log_ratio) - math.log(len(log_ratio)))


def generic_pairs(tokenizer, texts: list[str], prefix_len: int, suffix_len: int
                  ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each sentence cut to the audited shape: its first ``prefix_len`` tokens and the next ``suffix_len``; a
    sentence too short for both keeps a suffix of ``suffix_len`` tokens at its end (half of it, if it has fewer than
    twice that) and as much prefix as precedes it, so n is measured on suffixes of the audited length wherever the
    sentence allows it."""
    pairs = []
    for text in texts:
        ids = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
        if len(ids) < 2:
            raise ValueError(f"generic sentence {text!r} has fewer than 2 tokens: it cannot be split into p and s")
        start, cut, end = generic_cut(len(ids), prefix_len, suffix_len)
        pairs.append((ids[start:cut], ids[cut:end]))
    return pairs


def generic_cut(n: int, prefix_len: int, suffix_len: int) -> tuple[int, int, int]:
    """(prefix start, cut, suffix end) of a generic sequence of ``n`` tokens (see ``generic_pairs``)."""
    if n >= prefix_len + suffix_len:
        return 0, prefix_len, prefix_len + suffix_len
    cut = max(n - suffix_len, n // 2)
    return max(0, cut - prefix_len), cut, n


def generic_in_training(tokenizer, frame: TrainingFrame, texts: list[str], prefix_len: int, suffix_len: int
                        ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each generic text in the training context: put in place of a record's memorization text in its training
    rendering (``frame``) and cut as ``generic_pairs`` cuts it, on its tokens there; the context is the rendering up
    to the cut (literal slices of the ids training would give that record)."""
    pairs = []
    for text in texts:
        ids, _, first, stop = frame.tokens(tokenizer, text)
        _, cut, end = generic_cut(stop - first, prefix_len, suffix_len)
        pairs.append((tuple(ids[: first + cut]), tuple(ids[first + cut : first + end])))
    return pairs


def public_generic_pairs(tokenizer, texts, count: int, prefix_len: int, suffix_len: int, seed: int
                         ) -> tuple[list[str], list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """``count`` seeded public paragraphs long enough for the audited shape, each cut into (first ``prefix_len``
    tokens, next ``suffix_len`` tokens). Returns (the texts of the pairs, the pairs)."""
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    out_texts, pairs = [], []
    for i in order:
        ids = tuple(tokenizer(texts[i], add_special_tokens=False)["input_ids"])
        if len(ids) >= prefix_len + suffix_len:
            out_texts.append(texts[i])
            pairs.append((ids[:prefix_len], ids[prefix_len : prefix_len + suffix_len]))
            if len(pairs) == count:
                break
    if not pairs:
        raise ValueError(
            f"audit.pa.generic_source=public: the public corpus has no paragraph of {prefix_len + suffix_len} tokens"
        )
    return out_texts, pairs


def planted(s: AuditSample) -> bool:
    """A sample the synthetic source planted: a canary, or a record ending in shared boilerplate."""
    return "canary" in s.tags or bool(s.tags.get("generic"))


def select_audited(samples: list[AuditSample], n: int, suffix_len: int) -> tuple[list[AuditSample], int]:
    """(the audited samples, how many of them are the random draw) for one client: the draw is the first n samples
    with at least ``suffix_len`` suffix tokens in the pool's seeded order, canaries left out (the pool always holds
    them; the draw must not); the planted samples the draw missed (canaries, boilerplate) follow it, audited for the
    ground truth but outside the rates. A draw that the suffix length leaves short of n is an error naming the
    numbers."""
    drawn, extra, _ = draw_and_planted(samples, n, suffix_len, planted)
    if len(drawn) < min(n, sum("canary" not in s.tags for s in samples)):
        client = samples[0].client if samples else "?"
        raise ValueError(f"audit.pa.n={n}, but only {len(drawn)} of client {client}'s {len(samples)} pooled samples "
                         f"(canaries aside) have {suffix_len} tokens after their prefix (audit.pa.suffix_len): "
                         "lower audit.pa.n or audit.pa.suffix_len, or raise audit.samples_per_client")
    return drawn + extra, len(drawn)


# ---------------------------------------------------------------- the audit method


def _log10(x) -> float | None:
    x = float(x)
    return None if not math.isfinite(x) else x / LN10


def _counts(ext: np.ndarray, pa: np.ndarray, pa_spread: float = 0.0) -> dict:
    """Counts and rates of the audited pairs; the PA rate's interval is Wilson's widened by ``pa_spread`` (the
    standard error the prior's random draw adds), in quadrature on each side, kept in [0, 1]."""
    e, p, n = int(ext.sum()), int(pa.sum()), int(len(ext))
    out = {"audited": n, "extractable": e, "pa_memorized": p, "pa_over_extractable": (p / e) if e else None}
    for name, k, extra in (("extractable_rate", e, 0.0), ("pa_rate", p, pa_spread)):
        r = rate(k, n)
        ci = r["ci95"]
        if ci is not None and extra > 0:
            d = Z95 * extra
            ci = [max(0.0, r["rate"] - math.hypot(r["rate"] - ci[0], d)),
                  min(1.0, r["rate"] + math.hypot(ci[1] - r["rate"], d))]
        out.update({name: r["rate"], f"{name}_se": r["se"], f"{name}_ci95": ci})
    return out


def draw_spread(log_p: np.ndarray, log_phat_per_trial: np.ndarray, log_m: float, log_n: float,
                drawn: np.ndarray, clients: np.ndarray) -> dict:
    """The standard error the prior's random draw adds to the PA rate: the spread of the rate decided with each
    trial's own P̂ (std over trials / sqrt(trials), for the mean over trials that decides), per client and ``all``;
    empty with a single trial, where the draw's spread cannot be seen."""
    trials = log_phat_per_trial.shape[0]
    if trials < 2 or not drawn.any():
        return {}
    flags = np.array([pa_decisions(log_p, lq, log_m, log_n)[1] for lq in log_phat_per_trial])  # [trials, S]

    def se(mask: np.ndarray) -> float:
        return float(flags[:, mask].mean(axis=1).std(ddof=1) / math.sqrt(trials)) if mask.any() else 0.0

    return {"all": se(drawn), **{int(c): se(drawn & (clients == c)) for c in np.unique(clients)}}


HIST_WIDTHS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)


def log10_histogram(values: np.ndarray, extractable: np.ndarray, max_bins: int = 30) -> dict:
    """Counts of log10 P(s|p)/P̂(s), all samples and extractable ones, on a grid of round bin widths
    (the narrowest of ``HIST_WIDTHS`` giving at most ``max_bins`` bins)."""
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v)
    if not ok.any():
        return {"edges": [], "all": [], "extractable": []}
    span = float(v[ok].max() - v[ok].min())
    width = next((w for w in HIST_WIDTHS if span / w <= max_bins), HIST_WIDTHS[-1])
    lo = math.floor(v[ok].min() / width) * width
    hi = max(math.ceil(v[ok].max() / width) * width, lo + width)
    edges = lo + width * np.arange(round((hi - lo) / width) + 1)
    edges[-1] = max(edges[-1], v[ok].max())  # float rounding must not drop the maximum
    return {
        "edges": edges.tolist(),
        "all": np.histogram(v[ok], edges)[0].tolist(),
        "extractable": np.histogram(v[ok & extractable], edges)[0].tolist(),
    }


@register
class PriorAwareMemorization(AuditMethod):
    name = "pa"
    Config = PriorAwareConfig
    title = "Prior-Aware memorization (PA)"
    size_keys = ("n", "c", "trials")
    # its scores (its pairs with the generic suffixes, under the prior prefixes) are its own: it runs in the second
    # lane after MR, whose generation leaves that lane idle while the first lane generates PEARL's samples
    runs_apart = True
    figures = (
        Figure("pa_memorized", "PA-memorized", kind="count", of="audited", console=True, sweep=None),
        Figure("pa_rate", "PA-memorized"),
        Figure("extractable_rate", "extractable", sweep=None),
        Figure("canary_pa_rate", "PA-memorized canaries", sweep=None),
        Figure("generic_pa_rate", "PA-memorized generic texts", sweep=None),
    )

    @classmethod
    def check(cls, cfg: PriorAwareConfig, experiment) -> None:
        if cfg.calibrates_on_generic_source and cfg.generic_source == "public" and not experiment.data.has_public_corpus:
            raise ValueError("audit.pa.generic_source=public needs a public corpus, and data.public_share=0 with no "
                             "data.public gives none: set one, or use audit.pa.generic_source=appendix_b")

    @classmethod
    def samples_needed(cls, cfg: PriorAwareConfig) -> dict[str, int]:
        return {"train": cfg.n}

    @classmethod
    def audited_train(cls, cfg: PriorAwareConfig, pool: AuditPool) -> set[str]:
        return {s.id for c in pool.clients for s in select_audited(pool.train[c], cfg.n, cfg.suffix_len)[0]}

    @classmethod
    def min_suffix(cls, cfg: PriorAwareConfig) -> int:
        return cfg.suffix_len

    def __init__(self, cfg: PriorAwareConfig, pool: AuditPool):
        super().__init__(cfg, pool)
        self.audited, self.drawn = [], []  # drawn[i]: audited sample i is part of the random draw (the rates)
        for c in pool.clients:
            samples, n_drawn = select_audited(pool.train[c], cfg.n, cfg.suffix_len)
            self.audited += samples
            self.drawn += [i < n_drawn for i in range(len(samples))]
        self.drawn = np.array(self.drawn, dtype=bool)
        self.context = cfg.context
        if self.context == "train":
            check_training_forms([s for c in pool.clients for s in pool.train[c]], "audit.pa.context")
        # the prior's prefixes are the pool's contexts in the same context as the audited pairs
        contexts = [s.scored_in(self.context)[0] for c in pool.clients for s in pool.train[c] if s.prefix_ids]
        self.seed = pool.seed if cfg.seed is None else cfg.seed
        idx = sample_prior_prefixes(len(contexts), cfg.c, cfg.trials, self.seed)
        self.prior_prefixes = [contexts[i] for i in idx.ravel()]  # trial-major, fixed for the whole run
        self.pool_size = len(contexts)
        # own_prefix[i, j]: prior draw i is audited sample j's own prefix (generic columns: never)
        own = np.array([[q == smp.scored_in(self.context)[0] for smp in self.audited] for q in self.prior_prefixes],
                       dtype=bool)
        self.m = cfg.m if cfg.m is not None else default_m(cfg.suffix_len)
        # the generic set n is calibrated on: raw (prefix, suffix) token pairs, and the pairs scored (in the context)
        self.generic_source = cfg.generic_source
        if self.generic_source == "auto":
            self.generic_source = "public" if pool.public_texts else "appendix_b"
        self.generic_texts, self.generic = [], []
        if cfg.n_ratio is None:
            if cfg.generic is not None:
                self.generic_texts = cfg.generic
                self.generic = generic_pairs(pool.tokenizer, self.generic_texts, pool.prefix_len, cfg.suffix_len)
            elif self.generic_source == "public":
                if not pool.public_texts:
                    raise ValueError("audit.pa.generic_source=public needs a public corpus (data.public or "
                                     "data.public_share); use audit.pa.generic_source=appendix_b")
                self.generic_texts, self.generic = public_generic_pairs(
                    pool.tokenizer, pool.public_texts, cfg.generic_count, pool.prefix_len, cfg.suffix_len, self.seed)
            else:
                self.generic_texts = default_generic(cfg.suffix_len)
                self.generic = generic_pairs(pool.tokenizer, self.generic_texts, pool.prefix_len, cfg.suffix_len)
        self.scored_generic = self._generic_in_context()
        self.own_prefix = np.hstack([own, np.zeros((len(own), len(self.generic)), dtype=bool)])

    def _generic_in_context(self) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """The generic calibration pairs as scored: after the prompt header (prompt context), or put in the run's
        training frame in place of a memorization text (train context; see the module docstring)."""
        if self.context == "prompt":
            return [(self.pool.prompt_context(p), s) for p, s in self.generic]
        if self.generic_texts and self.pool.train_frame is None:
            raise ValueError("audit.pa.context=train calibrates n on generic sequences put in a training record's "
                             "rendering, and this run has no record to take it from: set audit.pa.n_ratio, or "
                             "audit.pa.context=prompt")
        return generic_in_training(self.pool.tokenizer, self.pool.train_frame, self.generic_texts, self.pool.prefix_len,
                                   self.cfg.suffix_len)

    @classmethod
    def round_cost(cls, cfg: PriorAwareConfig, clients: int) -> str:
        return f"{cfg.n * clients} suffixes scored under {cfg.c * cfg.trials} prior prefixes each"

    # -- per round
    def audit(self, audited: AuditedModel) -> dict:
        cfg, samples = self.cfg, self.audited
        pairs = [(p, s[: cfg.suffix_len]) for p, s in (smp.scored_in(self.context) for smp in samples)]
        n_s = len(pairs)
        generic = self.scored_generic
        log_p_all = audited.logprobs(pairs + generic)
        # One pass of the engine for the audited and the generic suffixes: each prefix's cache serves both.
        logq = audited.prior_logprobs(self.prior_prefixes, [s for _, s in pairs + generic])
        est = prior_estimate(logq, cfg.trials, exclude=self.own_prefix)
        log_p, log_phat = log_p_all[:n_s], est.log_phat[:n_s]
        log_ratio = log_p - log_phat

        calibration = self._calibration(log_p_all[n_s:], est, n_s)
        log_n = math.log(cfg.n_ratio) if cfg.n_ratio is not None else calibration["log_n"]
        ext, pa = pa_decisions(log_p, log_phat, math.log(self.m), log_n)
        per_client, overall = self._rates(log_p, est, n_s, log_n, ext, pa)
        rows = self._rows(log_p, log_phat, log_ratio, est, ext, pa)
        order = np.argsort(-log_ratio, kind="stable")
        section = {
            "config": {
                "m": self.m, "n": math.exp(log_n) if log_n < 700 else None, "log10_n": _log10(log_n),
                "n_source": "config" if cfg.n_ratio is not None else "calibrated",
                "c": cfg.c, "trials": cfg.trials, "prior_pool": self.pool_size, "seed": self.seed,
                "audited_per_client": cfg.n, "suffix_len": cfg.suffix_len, "context": self.context,
            },
            "context": self.context,
            "calibration": calibration,
            "overall": overall,
            "per_client": per_client,
            "prior_rel_se_median": float(np.median(est.rel_se[:n_s])) if n_s else None,
            "histogram_log10_ratio": log10_histogram(log_ratio / LN10, ext),
            "top": [self._example(samples[i], rows[i]) for i in order[: cfg.top]],
            "lowest": [self._example(samples[i], rows[i]) for i in order[::-1][: cfg.top]],
            "ground_truth": self._ground_truth(samples, ext, pa),
            "samples": rows,
        }
        section["distance_to_extractable"] = distance_to_extractable(log_p, self.m)
        # P(s|p) <= 1, so a pair's ratio is at most 1 / P̂(s): past that no pair can be PA-memorized, whatever it is
        best_possible = float(-log_phat.min()) if n_s else float("nan")
        section["max_possible_log10_ratio"] = _log10(best_possible)
        notes = self._notes(section, n_s, log_n, best_possible)
        if notes:
            section["note"] = " ".join(notes)
        section["headline"] = self._headline(section)
        return section

    def _rates(self, log_p: np.ndarray, est: PriorEstimate, n_s: int, log_n: float, ext: np.ndarray, pa: np.ndarray
               ) -> tuple[list[dict], dict]:
        """(per-client counts, overall counts) of the random draw, with the spread the prior's draw adds."""
        # the rates are over the random draw; the prior's draw moves them too: the spread of the per-trial decisions
        drawn, clients = self.drawn, np.array([s.client for s in self.audited])
        spread = draw_spread(log_p, est.log_phat_per_trial[:, :n_s], math.log(self.m), log_n, drawn, clients)
        per_client = [{"client": c, **_counts(ext[drawn & (clients == c)], pa[drawn & (clients == c)],
                                              spread.get(c, 0.0))} for c in self.pool.clients]
        overall = _counts(ext[drawn], pa[drawn], spread.get("all", 0.0))
        return per_client, overall

    def _rows(self, log_p: np.ndarray, log_phat: np.ndarray, log_ratio: np.ndarray, est: PriorEstimate,
              ext: np.ndarray, pa: np.ndarray) -> list[dict]:
        """One row per audited sample: its probabilities, prior, ratio and decisions."""
        drawn = self.drawn
        return [
            {
                "id": s.id, "client": s.client,
                "log10_p": _log10(log_p[i]), "log10_prior": _log10(log_phat[i]),
                "log10_se_of_prior": _log10(est.log_se[i]), "rel_se": float(est.rel_se[i]),
                "log10_ratio": _log10(log_ratio[i]),
                "extractable": bool(ext[i]), "pa_memorized": bool(pa[i]), "drawn": bool(drawn[i]),
                "tags": {k: v for k, v in s.tags.items() if k in ("canary", "copies", "shared", "generic")},
            }
            for i, s in enumerate(self.audited)
        ]

    @staticmethod
    def _notes(section: dict, n_s: int, log_n: float, best_possible: float) -> list[str]:
        """The section's warnings: an n no pair can reach, or a model far from any audited suffix."""
        notes = []
        if n_s and log_n >= best_possible:
            notes.append(f"n = 10^{log_n / LN10:.1f} is beyond reach: even P(s|p) = 1 gives at most a ratio of "
                         f"10^{best_possible / LN10:.1f} for the audited suffixes, so no pair can be PA-memorized at "
                         f"this n (calibrated on: {section['calibration'].get('source')}).")
        if section["distance_to_extractable"]["far"]:
            d = section["distance_to_extractable"]
            notes.append(f"Far from memorizing: the most likely audited suffix has log10 P(s|p) = "
                         f"{d['best_log10_p']:.1f}, {d['orders_below']:.1f} orders of magnitude below the "
                         f"extractability threshold (log10 m = {d['log10_m']:.1f}): zero rates here say that the model "
                         f"has not come near reproducing any audited suffix, not that it resists memorization.")
        return notes

    @staticmethod
    def _headline(section: dict) -> dict:
        """The section's headline: the overall counts and rates, and the planted texts' PA rates."""
        overall = section["overall"]
        headline = {
            "audited": overall["audited"], "extractable": overall["extractable"],
            "pa_memorized": overall["pa_memorized"],
            "extractable_rate": overall["extractable_rate"], "extractable_rate_ci95": overall["extractable_rate_ci95"],
            "pa_rate": overall["pa_rate"], "pa_rate_ci95": overall["pa_rate_ci95"],
            "pa_over_extractable": overall["pa_over_extractable"], "log10_n": section["config"]["log10_n"],
        }
        gt = section["ground_truth"]
        if gt.get("canary"):
            total = sum(v["audited"] for v in gt["canary"].values())
            headline["canary_pa_rate"] = sum(v["pa_memorized"] for v in gt["canary"].values()) / total
        if gt.get("generic"):
            headline["generic_pa_rate"] = gt["generic"]["pa_rate"]
        return headline

    def _calibration(self, log_p_generic: np.ndarray, est: PriorEstimate, n_s: int) -> dict:
        if self.cfg.n_ratio is not None:
            return {"source": "config"}
        log_ratio = log_p_generic - est.log_phat[n_s:]
        log_n = mean_ratio_log(log_ratio)
        return {
            "source": "config" if self.cfg.generic is not None else self.generic_source,
            "log_n": log_n,
            "log10_n": _log10(log_n),
            "mean": "ratio space (the paper's average of P(s|p)/P̂(s))",
            "sequences": [
                {"text": self._generic_text(t), "prefix_tokens": len(p), "context_tokens": len(q),
                 "suffix_tokens": len(s), "log10_p": _log10(lp), "log10_prior": _log10(lq),
                 "log10_ratio": _log10(lr)}
                for t, (p, _), (q, s), lp, lq, lr in zip(
                    self.generic_texts, self.generic, self.scored_generic, log_p_generic, est.log_phat[n_s:], log_ratio
                )
            ],
        }

    def _generic_text(self, text: str) -> str:
        """A calibration text for the report: sentences of the public corpus are rows of the data source (redacted
        like training text), the fixed generic sentences are not."""
        if self.cfg.generic is None and self.generic_source == "public":
            return self.pool.redact(text)
        return text[:60] + ("…" if len(text) > 60 else "")

    def _example(self, s: AuditSample, row: dict) -> dict:
        keys = ("id", "client", "log10_ratio", "log10_p", "log10_prior", "extractable", "pa_memorized", "tags")
        suffix = s.scored_in(self.context)[1][: self.cfg.suffix_len]
        return {k: row[k] for k in keys} | {
            "prefix": self.pool.redact(s.prefix_text_in(self.context)),
            "suffix": self.pool.redact(self.pool.tokenizer.decode(list(suffix)))
        }

    @staticmethod
    def _ground_truth(samples: list[AuditSample], ext: np.ndarray, pa: np.ndarray) -> dict:
        canary = np.array(["canary" in s.tags for s in samples], dtype=bool)
        generic = np.array([bool(s.tags.get("generic")) and "canary" not in s.tags for s in samples], dtype=bool)
        if not canary.any() and not generic.any():
            return {}
        out: dict = {"canary": {}}
        group = np.array([canary_group(s.tags) if "canary" in s.tags else "" for s in samples])
        for k in sorted(set(group[canary].tolist()), key=canary_group_order):
            sel = canary & (group == k)
            out["canary"][k] = _counts(ext[sel], pa[sel])
        if generic.any():
            out["generic"] = _counts(ext[generic], pa[generic])
        rest = ~canary & ~generic
        out["untagged"] = _counts(ext[rest], pa[rest])
        return out

    def truth_rows(self, section: dict) -> list[dict]:
        return [{"id": s["id"], "tags": s.get("tags") or {}, "split": "train", "score": s["log10_ratio"],
                 "decision": bool(s["pa_memorized"])} for s in section.get("samples", [])]

