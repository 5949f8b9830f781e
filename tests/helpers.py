"""Small real parts for the tests: a byte-level BPE tokenizer with a ChatML template trained on seeded sentences
(the tiny preset's recipe), small Qwen2 models, and audit samples made from texts.

Everything here is deterministic from its seed, so a test or bench that builds the same part twice gets the
same weights and the same samples.
"""

from __future__ import annotations

import functools
import html
import re
import shutil
import subprocess
from pathlib import Path

import torch

from bench.generated_text import sentences, texts  # noqa: F401  (texts: the tests' paragraphs, from here)
from fedmem.audit.base import AuditPool, AuditSample
from fedmem.audit.pool import header_ids, text_sample, with_training_form
from fedmem.audit.training_context import TrainingFrame
from fedmem.data.records import Record
from fedmem.engine.batching import language_model_batch
from fedmem.engine.config import Decoding
from fedmem.engine.model.tiny import qwen2_model, train_tokenizer


def words(text: str) -> list[str]:
    """The lower-cased word tokens of a text (letters and digits), as the detector's verbatim check counts them."""
    return re.findall(r"[^\W_]+", text.lower())


USER_TEMPLATE = "Please continue the following text. {text}"

@functools.lru_cache(maxsize=2)
def tiny_tokenizer(vocab_size: int = 512):
    """The tiny preset's tokenizer recipe (byte-level BPE, ChatML template) on seeded sentences."""
    return train_tokenizer(sentences(400, seed=1) + [USER_TEMPLATE], vocab_size)


def tiny_model(tokenizer, hidden: int = 64, layers: int = 2, seed: int = 0):
    """A tiny-preset-shaped Qwen2 model (tied embeddings, the tokenizer's special ids), in eval mode."""
    heads = max(2, hidden // 32)
    return qwen2_model(
        len(tokenizer), hidden, 2 * hidden, layers, heads, heads // 2 if heads % 2 == 0 else heads, seed=seed,
        max_position_embeddings=512, tie_word_embeddings=True, bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    ).eval()


def text_frame(tokenizer) -> TrainingFrame:
    """The training rendering of a record whose user turn is its text alone (the ``text`` template, chat-rendered):
    its training context is the open user turn holding the prefix, the same ids as the prompt's."""
    return TrainingFrame.of(tokenizer, Record(id="frame", user="text", assistant="", mem_text="text"))


def make_sample(tokenizer, text: str, client: int, split: str, idx: int, prefix_len: int, suffix_len: int,
                tags: dict | None = None) -> AuditSample:
    """Prefix = first ``prefix_len`` tokens of the text, suffix = the next ``suffix_len`` (the fixture's texts are
    cut there); the prompt is the chat template's open user turn holding the prefix (as the audit pool's), and the
    training form that of a record whose user turn is the text (``text_frame``), so ``memorize`` trains on it."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    sample = text_sample(tokenizer, ids, header_ids(tokenizer), prefix_len, client, split, idx, suffix_len, tags)
    return with_training_form(sample, text_frame(tokenizer).form(tokenizer, text, prefix_len, suffix_len))


def make_run(tokenizer, n_clients: int = 2, n_train: int = 3, n_test: int = 3, prefix_len: int = 24,
             suffix_len: int = 24, seed: int = 0, decoding: Decoding | None = None) -> AuditPool:
    """An AuditPool over seeded paragraphs; sample 0 of every client is tagged as a 4-copy canary."""
    train, test = {}, {}
    for c in range(n_clients):
        tr = texts(n_train, seed=100 + c)
        te = texts(n_test, seed=200 + c)
        train[c] = [make_sample(tokenizer, t, c, "train", i, prefix_len, suffix_len,
                                {"canary": f"k{c}{i}", "copies": 4} if i == 0 else {}) for i, t in enumerate(tr)]
        test[c] = [make_sample(tokenizer, t, c, "test", i, prefix_len, suffix_len) for i, t in enumerate(te)]
    return AuditPool(
        train=train, test=test, train_sizes={c: n_train for c in train}, tokenizer=tokenizer,
        decoding=decoding or Decoding(), prefix_len=prefix_len, prompt_header=header_ids(tokenizer), seed=seed,
        train_frame=text_frame(tokenizer),
    )


def memorize(model, samples: list[AuditSample], steps: int = 60, lr: float = 3e-3, seed: int = 0):
    """Overfit the model on prompt + suffix of ``samples`` (a stand-in for fine-tuning on the members)."""
    torch.manual_seed(seed)
    ids, labels, att = language_model_batch([list(s.prompt_ids) + list(s.suffix_ids) for s in samples], pad_id=0)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=att, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    return float(loss.item())


def sweep_job(root, n: int, config: dict, seed: int, ci95: dict | None = None, **final: float) -> None:
    """Job ``n`` of a sweep directory as a finished run leaves it: its config (with ``seed``) and a summary whose
    curves end at round 3 with ``final`` (``method__figure=value``), and the final round's intervals ``ci95``
    (``{"method/figure": [lo, hi]}``)."""
    import json

    import yaml

    d = root / str(n)
    d.mkdir()
    (d / "config.yaml").write_text(yaml.safe_dump({**config, "seed": seed}))
    curves = {k.replace("__", "/"): [[0, 0.0], [3, v]] for k, v in final.items()}
    bands = {k: [[3, lo, hi]] for k, (lo, hi) in (ci95 or {}).items()}
    (d / "summary.json").write_text(json.dumps({"curves": curves, "ci95": bands}))


def wandb_records(run_dir) -> list:
    """Every record of a run's offline W&B runs (``<run>/wandb/offline-run-*/run-*.wandb``, in the order written), as
    W&B's own ``Record`` protobufs. The file is W&B's transaction log: a ``:W&B`` header (7 bytes), then LevelDB's
    log format, 32 KiB blocks of chunks with a 7-byte header each (checksum, length, type: 1 whole, 2 first, 3
    middle, 4 last)."""
    import struct
    from pathlib import Path

    from wandb.proto import wandb_internal_pb2

    block, out = 32768, []
    for path in sorted(Path(run_dir).glob("wandb/offline-run-*/run-*.wandb")):
        data = path.read_bytes()
        assert data[:4] == b":W&B", path
        pos, chunks = 7, b""
        while pos + 7 <= len(data):
            if block - pos % block < 7:  # a block's tail too short for a header is padding
                pos += block - pos % block
                continue
            _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
            if kind == 0:  # zero padding to the end of the block
                pos += block - pos % block
                continue
            chunks += data[pos + 7:pos + 7 + length]
            pos += 7 + length
            if kind in (1, 4):
                out.append(wandb_internal_pb2.Record.FromString(chunks))
                chunks = b""
    return out


def wandb_items(items) -> dict:
    """W&B's ``{key: value}`` from a record's items (``key``, or the ``nested_key`` path joined by dots)."""
    import json

    return {item.key or ".".join(item.nested_key): json.loads(item.value_json) for item in items}


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def rendered_text(page: Path) -> str:
    """The DOM of ``page`` after a real headless browser loaded it, as text, with no network at all."""
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    body = out[out.index("<body"):]  # the page's text, not its style sheet
    return html.unescape(re.sub(r"<[^>]+>", " ", body))
