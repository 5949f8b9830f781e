"""Audit methods. Importing this package registers the built-in methods in ``AUDIT_METHODS``."""

from fedmem.audit import mia, mr, pearl, prior_aware, utility  # noqa: F401
from fedmem.audit.base import (  # noqa: F401
    AUDIT_METHODS,
    AuditMethod,
    AuditRun,
    AuditSample,
    RoundContext,
    build_method_config,
    register,
)
