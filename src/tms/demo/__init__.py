"""`tms demo`: the service end to end on this machine (see `tms.demo.run`)."""

from tms.demo.keep import console_url, wait_for_stop
from tms.demo.options import DemoOptions, DemoRefused
from tms.demo.run import LOG_FILE, DemoReport, demo_policy, keep_running, run_demo
from tms.demo.table import DemoWriter, callback_payload, data_files, file_groups, trips
from tms.demo.watch import OperationSummary, Watcher, describe_progress
from tms.demo.worker_ready import ResidentWorker, await_worker

__all__ = [
    "LOG_FILE",
    "DemoOptions",
    "DemoRefused",
    "DemoReport",
    "DemoWriter",
    "OperationSummary",
    "ResidentWorker",
    "Watcher",
    "await_worker",
    "callback_payload",
    "console_url",
    "data_files",
    "demo_policy",
    "describe_progress",
    "file_groups",
    "keep_running",
    "run_demo",
    "trips",
    "wait_for_stop",
]
