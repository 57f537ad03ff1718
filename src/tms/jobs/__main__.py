"""`python -m tms.jobs --attempt-id N`: run one attempt (the spark-submit target, through
`entry.py`). The token comes from `TMS_JOB_TOKEN`, never from the command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from tms.jobs.client import JobClient
from tms.jobs.runner import EXIT_USAGE, JobRunner

__all__ = ["main", "run_as_script"]


def main(argv: Sequence[str] | None = None) -> tuple[int, bool]:
    """(exit code, whether the work thread was abandoned while still running)."""
    parser = argparse.ArgumentParser(prog="python -m tms.jobs", description=__doc__)
    parser.add_argument("--attempt-id", type=int, required=True)
    parser.add_argument(
        "--api-url", default=os.environ.get("TMS_API_URL"), help="default: $TMS_API_URL"
    )
    args = parser.parse_args(argv)
    token = os.environ.get("TMS_JOB_TOKEN", "")
    if not token or not args.api_url:
        print("tms job: TMS_JOB_TOKEN and TMS_API_URL (or --api-url) are required", file=sys.stderr)
        return EXIT_USAGE, False
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s tms-job %(name)s: %(message)s",
    )
    for noisy in ("httpx", "httpcore", "py4j"):  # one line per heartbeat would bury errors
        logging.getLogger(noisy).setLevel(logging.WARNING)
    with JobClient(args.api_url, args.attempt_id, token) as client:
        runner = JobRunner(client)
        code = runner.run()
    return code, runner.abandoned_work


def run_as_script(argv: Sequence[str] | None = None) -> None:
    code, abandoned = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    if abandoned:
        os._exit(code)  # the work thread is stuck inside Spark; do not wait for it
    sys.exit(code)


if __name__ == "__main__":
    run_as_script()
