"""Tools for tests, the demo and benchmarks, apart from the services' own code.

`sample_writer/` writes sample Hudi tables (the demo's table, the tests' and the benchmarks'
tables); it is not the services' write path. `fault_pause` and `task_pause` are the pause
points the runtime passes through (a job's steps, a Spark task's work): off unless a test's
environment names a folder, they let a test kill or cancel a job at exactly one step.
"""
