"""Table services over a SparkSession and a Hudi table, one subpackage per action
(`compaction`, `clustering`, `clean`, `index`, `metadata`), and what they share: the registry
of services, the executors of their plans (`executor`), the steps of an execution
(`execution`), conflicts, cancel, rollback, progress and Spark tasks."""
