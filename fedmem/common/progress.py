"""A minimal progress bar (tqdm) that can be switched off for tests and CI logs (``train.progress=false``).

Bars go to stderr and vanish when done (``leave=False``): what stays on the console is one line per round
(``fedmem.reports.console``). Clients never show bars: from Ray's actors every update would reach the driver as a line."""

from __future__ import annotations

import contextlib
import sys


class _Bar:
    def __init__(self, total: int, desc: str, enabled: bool):
        self._bar = None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True)

    def advance(self, n: int = 1, **postfix):
        if self._bar is not None:
            self._bar.update(n)
            if postfix:
                self._bar.set_postfix({k: f"{v:.3f}" if isinstance(v, float) else v for k, v in postfix.items()})

    def describe(self, desc: str):
        if self._bar is not None:
            self._bar.set_description(desc)

    def close(self):
        if self._bar is not None:
            self._bar.close()


@contextlib.contextmanager
def progress_bar(total: int, desc: str, enabled: bool = True):
    bar = _Bar(total, desc, enabled)
    try:
        yield bar
    finally:
        bar.close()


@contextlib.contextmanager
def library_bars(enabled: bool):
    """Hugging Face's own progress bars ("Loading weights") on, or off for the block."""
    if enabled:
        yield
        return
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()
