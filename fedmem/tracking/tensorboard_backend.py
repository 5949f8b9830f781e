"""TensorBoard: event files in the run directory itself, so ``tensorboard --logdir <run>`` shows one run and
``--logdir <sweep>`` (or ``runs/``) every job of a sweep side by side, each named by its directory. The config is
the HPARAMS tab's parameters; the round and run pages (Markdown) are text and their plots images, a round's at
step = round; the status is the ``status`` text. The JSON and HTML pages are beside the event files already."""

from __future__ import annotations

import struct
from pathlib import Path


def png_size(data: bytes) -> tuple[int, int]:
    """(height, width) from a PNG's header, which TensorBoard's image summary records."""
    width, height = struct.unpack(">II", data[16:24])
    return height, width


class Backend:
    def __init__(self, settings, run_dir: Path, name: str, identity: dict | None):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir))  # a resumed run adds an event file beside the first
        self.identity = {"id": str(run_dir)}

    def log_params(self, params: dict) -> None:
        from torch.utils.tensorboard.summary import hparams

        for summary in hparams(params, {}):
            self.writer.file_writer.add_summary(summary)
        self.writer.flush()

    def log_metrics(self, values: dict[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def log_files(self, files: list[Path], folder: str, step: int | None) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        where = "round" if step is not None else "run"
        for path in files:
            if path.suffix == ".md":
                self.writer.add_text(f"{where}/{path.name}", path.read_text(), step)
            elif path.suffix == ".png":
                data = path.read_bytes()
                height, width = png_size(data)
                image = Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=data)
                self.writer.file_writer.add_summary(Summary(value=[Summary.Value(tag=f"{where}/{path.stem}",
                                                                                 image=image)]), step)
        self.writer.flush()

    def end(self, status: str, error: str | None) -> None:
        self.writer.add_text("status", status + (f": {error}" if error else ""))
        self.writer.close()
