"""moto's S3 server in a process of its own, for the test session.

The tests' process runs Spark sessions, Hudi's JVM, servers and thousands of tests; an S3
server living in it once stopped accepting connections near the end of a long run, with
no trace of why. In its own process the server shares none of that, and the session can
see that it ended and start it again.

    python tests/storage/s3_process.py PORT

serves path-style S3 on 127.0.0.1:PORT until its standard input closes (so it never
outlives the process that started it); `GET /__wire__` answers the requests it received
so far, by kind and by (kind, path class), as JSON (that request is not counted).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.storage import CountingMotoServer, WireLog

WIRE_PATH = "/__wire__"


class ReportingMotoServer(CountingMotoServer):
    """The counting server, with its request counts readable over HTTP."""

    def application(self) -> Callable[..., Any]:
        counted = super().application()
        wire = self.wire

        def served(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            if environ.get("PATH_INFO") != WIRE_PATH:
                return counted(environ, start_response)
            kinds, paths = wire.snapshot()
            body = json.dumps(
                {"kinds": dict(kinds), "paths": [[*key, count] for key, count in paths.items()]}
            ).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]

        return served


def exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main(port: int) -> int:
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    server = ReportingMotoServer(port, WireLog())
    server.start()
    print(f"serving S3 on 127.0.0.1:{port}", flush=True)
    assert server._thread is not None
    server._thread.join()  # returns only when the serve loop ended
    print("the serve loop ended", flush=True)
    return 3


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
