"""Experiment trackers: a run's resolved config, every round's declared figures with their interval bounds, its
round and run pages and plots, and its final status, sent to MLflow, TensorBoard or Weights & Biases as well as
to its own reports (``tracker=``). ``run`` follows one fedmem run (``run_tracker``); ``config`` holds the settings;
one module per tracker (``mlflow_backend``, ``tensorboard_backend``, ``wandb_backend``) imports its package only
when chosen. Reads the reports it is handed and the figures the audit methods declare; may import
``fedmem.reports``, ``fedmem.audit`` and ``fedmem.common``."""

from fedmem.tracking.config import TrackerConfig, check_installed
from fedmem.tracking.run import NO_TRACKER, RunTracker, run_tracker

__all__ = ["NO_TRACKER", "RunTracker", "TrackerConfig", "check_installed", "run_tracker"]
