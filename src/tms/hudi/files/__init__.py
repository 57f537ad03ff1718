"""Files of a table: file names, the file-system view, base and log files (log blocks, their
reader and writer), markers, merging record versions and reading a file slice. May import
`timeline/`, `avro/` and the base modules; never `tms.hudi.table`."""
