"""One router per resource."""

from tms.api.routes import health, hoodie, jobs, operations, tables

__all__ = ["health", "hoodie", "jobs", "operations", "tables"]
