"""Writing a table: the writer (for tests, the demo and benchmarks), its write handles, key
generation and new tables. The top of `tms.hudi`: may import everything else in it."""
