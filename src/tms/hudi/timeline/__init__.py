"""The timeline: instants, their files and state transitions, the archived timeline (layout 2
history, read only), and the heartbeats of running instants. Imports only `avro/` and the base
modules of `tms.hudi`."""
