"""The timeline: instants, their files and state transitions, and the heartbeats of running
instants. Imports only `avro/` and the base modules of `tms.hudi`."""
