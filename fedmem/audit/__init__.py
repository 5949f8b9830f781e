"""Audit methods. Importing this package registers the built-in methods in ``AUDIT_METHODS``."""

from fedmem.audit import pearl, prior_aware, utility  # noqa: F401
from fedmem.audit.base import AUDIT_METHODS, AuditMethod, AuditRun, AuditSample, RoundContext, register  # noqa: F401
