"""Audit methods. Importing this package imports every module in it, which registers the methods they define
(``@register``) in ``AUDIT_METHODS``: a new method is one new module here, listed nowhere else."""

import importlib
import pkgutil

from fedmem.audit.base import (  # noqa: F401
    AUDIT_METHODS,
    AuditMethod,
    AuditRun,
    AuditSample,
    Figure,
    RoundContext,
    build_method_config,
    declared_figures,
    register,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
