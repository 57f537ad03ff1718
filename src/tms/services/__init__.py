"""Table services over a SparkSession and a Hudi table: compaction, clustering, clean."""
