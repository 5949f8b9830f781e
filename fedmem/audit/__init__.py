"""Audit methods: the shared core (the method interface, the audit pool, the training context, intervals,
calibration, the ground truth, the methods' agreement), a package per method that has parts (``mr/``, ``pearl/``)
and a module per method of one file. Importing this package imports every module and package in it, which registers
the methods they define (``@register``) in ``AUDIT_METHODS``: a new method is one new module (or package) here,
listed nowhere else. It may import the common helpers, the data and the engine."""

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
