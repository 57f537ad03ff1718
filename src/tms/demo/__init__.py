"""`tms demo`: the service end to end on this machine (see `tms.demo.run`)."""

from tms.demo.run import DemoOptions, DemoReport, demo_policy, run_demo
from tms.demo.table import DemoWriter, callback_payload, data_files, file_groups, trips
from tms.demo.watch import OperationSummary, Watcher

__all__ = [
    "DemoOptions",
    "DemoReport",
    "DemoWriter",
    "OperationSummary",
    "Watcher",
    "callback_payload",
    "data_files",
    "demo_policy",
    "file_groups",
    "run_demo",
    "trips",
]
