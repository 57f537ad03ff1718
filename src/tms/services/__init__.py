"""Table services over a SparkSession and a Hudi table.

One subpackage per action, each a planner and an executor of tms's own:
`compaction/` (`plan`, `strategy`, `execute`), `clustering/` (`plan`, `execute`; `rewrite`:
one group's slices merged, sorted and written by a task; `ranges`: a group split over tasks by
ranges of its first sort column), `clean/` (`plan`, `execute`; `rollbacks`: what a clean
finishes before it plans: cancelled and stale plans, failed writes), `index/` (`build`,
RFC-45: build, catch-up, complete; cancellable until catch-up), `metadata/` (the metadata
table's `compaction` and the `clean` after it, on a `MetadataTable` that answers its own
refusals), `log_compaction/` (`plan`, `execute`: its slices' log files merged into one
new log file each, where tms writes what Hudi writes; `merge`: the merge of a slice's log
blocks, deletes kept). `partition_ttl/` (its `plan`: the expired partitions, the `pending` work
that holds some, the dry run) is a planner whose plans Hudi's code runs.
`archival/` (`plan`) is the dry run of Hudi's archiver, which `apache_hudi.archiver` runs.
`apache_hudi/` is Apache Hudi's own code as the second executor and planner: its
Spark SQL procedures on a session of their own (`procedures`), with the write configs that
keep a run to what the operation asked (`options`), and its async indexer (`indexer`).

What they share: `registry` (one entry per action: its planner, pending plans, executors, and
which executor an operation's choice gets on a table), `table_refusals` (what keeps tms's own
services off a table), `execution` (the one path that runs a pending plan: a live heartbeat
refused, a crashed attempt's inflight rolled back or run again, the heartbeat, the commit under
the table lock, the figures), `plan_executor` (`PlanExecutor`, and `CommitActionExecutor`, the
skeleton of compaction and clustering after Hudi's action executors), `metadata_sync` (the
metadata table's delta commit of a data table service), `spark` (a Spark task per file group),
`rollback`, `progress` (the stage a service enters, for whoever runs it), `plan_cancel` (RFC-79)
and `conflicts` (RFC-56). Who runs them is `tms.jobs`, for the service's jobs and `tms run`
alike.
"""
