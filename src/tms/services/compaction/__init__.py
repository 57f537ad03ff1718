"""Compaction of merge-on-read tables: planning (`plan`, `strategy`) and execution (`execute`)."""
