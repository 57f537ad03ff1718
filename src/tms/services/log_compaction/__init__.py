"""Log compaction (Hudi's `logcompaction`, RFC-48): a file slice's log blocks merged into one
new log file, the base file kept."""
