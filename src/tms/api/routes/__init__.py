"""One router per resource."""

from tms.api.routes import callback, health, hoodie, jobs, operations, tables

__all__ = ["callback", "health", "hoodie", "jobs", "operations", "tables"]
