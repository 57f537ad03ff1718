"""Apache Hudi's own table-service code as an executor of plans (`tms.executor_choice.HUDI`).

It runs Hudi's Spark SQL procedures (`run_compaction`, `run_clustering`, `run_clean`) on the
job's SparkSession, which carries Hudi's Spark bundle (`tms.spark_runtime.hudi_bundle`). Hudi
reads the table's own configs from `hoodie.properties`; what tms adds keeps the run to what the
operation asked for (`options`): the table stays at its version, no inline archival, clean or
metadata compaction, no metadata partition built or dropped, the writers' lock taken.
"""
