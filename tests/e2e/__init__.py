"""End-to-end tests: `tms serve` subprocesses, real PostgreSQL, real spark-submit, real tables."""
