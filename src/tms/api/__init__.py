"""The HTTP API: RFC-43 and Hudi client endpoints, the commit callback, operator resources,
the job side, health and metrics."""

from tms.api.app import create_app

__all__ = ["create_app"]
