"""Partition TTL (Hudi 1.x's partition lifecycle): partitions whose last commit is older than a
number of days deleted by a `delete_partition` replacecommit; the cleaner removes their files
afterwards. tms plans (`plan`, what pending work holds a partition in `pending`), Hudi's write
client runs the plan (`tms.services.apache_hudi.partition_ttl`)."""
