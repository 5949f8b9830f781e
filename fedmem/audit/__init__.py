"""Audit methods and the core they share.

The core, which any method may use: ``base`` (the method interface, the audit pool and the audited model's door),
``pool``, ``config``, ``training_context``, ``intervals`` (intervals and the smallest detectable effects),
``calibration`` (thresholds at a target FPR), ``membership`` (the membership attacks' draw and their reading: AUC,
TPR at low FPR, the blind baseline), ``performance``, ``truth`` and ``agreement`` (the ground truth and the methods'
agreement on it). The methods: a package per method that has parts (``mr/``, ``pearl/``) and a module per method of
one file (``mia``, ``trajectory``, ``source_inference``, ``prior_aware``, ``exposure``, ``one_run``,
``canary_clients``, ``utility``). A method imports the core, never another method (``tests/test_layering.py``): what
two methods share moves into the core. Importing this package imports every module and package in it, which
registers the methods they define (``@register``) in ``AUDIT_METHODS``: a new method is one new module (or package)
here, listed nowhere else. It may import the common helpers, the data and the engine."""

import importlib
import pkgutil

from fedmem.audit.base import (  # noqa: F401
    AUDIT_METHODS,
    AuditedModel,
    AuditMethod,
    AuditPool,
    AuditSample,
    Figure,
    build_method_config,
    declared_figures,
    register,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
