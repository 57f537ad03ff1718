"""Commit ingest: Hudi writers' commit callbacks become stored commits and operations.

The callback's handling (`callback`), what action a commit is (`commit_action`), group commit
of concurrent notifications (`group_commit`, `commit_batch`), what storage shows of a table
(`probe`, read through `tms.blocking_calls`) and registering tables (`registration`). The API
serves it; nothing here imports the API.
"""
