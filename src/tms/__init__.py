"""tms: a table management service for Apache Hudi."""

__version__ = "0.1.0"
