"""The resident Spark worker (`tms worker`): one long-running PySpark application that
claims attempts from the service and runs them on its SparkSession."""

from tms.worker.client import WorkerApiError, WorkerClient
from tms.worker.loop import ResidentWorker, WorkerOptions

__all__ = ["ResidentWorker", "WorkerApiError", "WorkerClient", "WorkerOptions"]
