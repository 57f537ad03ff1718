"""Hudi's timeline server file-system view (RFC-50), served for registered tables: each
table's timeline and file-system view kept in memory and advanced by the commits the store
records, answered with Hudi's DTOs (`handler`, `endpoints`, `dto`), built from a listing
kept in step (`listing`, `snapshot`, `cache`)."""

from tms.view.cache import TableRef, ViewCache
from tms.view.handler import ViewHandler

__all__ = ["TableRef", "ViewCache", "ViewHandler"]
