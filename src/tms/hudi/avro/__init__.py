"""Hudi's Avro and JSON forms: the codec and its `avsc/` schemas, record schemas, commit
metadata, write stats, delete records, the Jackson printer and checked JSON fields. Imports
only the base modules of `tms.hudi`."""
