"""A writer of sample tables for tests, the demo and benchmarks (not the services' write
path): the writer, its write handles, key generation and new tables. The top of `tms.hudi`:
may import everything else in it."""
