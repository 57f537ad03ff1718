"""Timeline archival (Hudi's `TableServiceType.ARCHIVE`): old completed instants moved out of
the active timeline by Hudi's archiver, for tables whose writers do not archive. `plan` is the
dry run in tms's own code: what Hudi's rules archive now, and why they stop there."""
