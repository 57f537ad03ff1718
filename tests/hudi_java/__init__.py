"""Tests against Apache Hudi itself: Hudi's Spark writer and reader (its Spark bundle, fetched
with Maven) on the same tables as tms's own reader and hudi-rs. `support` says how."""
