"""The Hudi table format: properties, timeline, file-system view, plans, log files, writer.

A pure library: it never imports the service side (only `tms.base_path`, the one spelling
of a table location, which imports nothing of ours, and the pause points tests use,
`tms.testing.task_pause`). Inside, imports go only downward:

    table         HudiTable                                  may import everything below
    files/        names, file-system view, base and log files, markers, merge, slice reader
                                                             may import timeline/, avro/ and below
    timeline/     instants, timeline, transitions, heartbeats
                                                             may import avro/ and below
    avro/         codec, schemas, commit metadata, write stats, plans' forms, JSON fields
    properties, table_paths, storage, actions, meta_fields, errors   (the base)

No subpackage imports `tms.hudi.table`; a subpackage's `__init__` may re-export its public
names. The writer of sample tables is `tms.testing.sample_writer`. `docs/architecture.md` states the
same rows, and `tests/test_layering.py` enforces them.
"""
