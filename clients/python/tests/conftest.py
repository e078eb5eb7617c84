"""A real Temporal dev server and a real tablefate worker for the suite, started as a deployment would start them.

The server: the Temporal CLI tablefate's own tests build (``TEMPORAL_CLI_PATH``, else ``.tablefate/bin/temporal``),
with the settings ``tablefate dev`` gives it. The worker: ``node bin/tablefate.js worker`` of this checkout, on a
state directory of the suite's. The Nexus endpoint ``tablefate`` is made as docs/contract says to on any server.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest
from temporalio.client import Client

ROOT = Path(__file__).resolve().parents[3]
TASK_QUEUE = "tablefate"
ENDPOINT = "tablefate"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _temporal_cli() -> str:
    cli = os.environ.get("TEMPORAL_CLI_PATH") or str(ROOT / ".tablefate" / "bin" / "temporal")
    if not os.access(cli, os.X_OK):
        raise RuntimeError(f"no Temporal CLI at {cli}: run `npm test` (or `npm start`) once, which builds it, or set TEMPORAL_CLI_PATH")
    return cli


def _wait_for(check, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


class Server:
    def __init__(self, state: Path):
        self.cli = _temporal_cli()
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log = open(state / "server.log", "wb")
        # As `tablefate dev` starts it: one partition per task queue, the history queues polled often.
        dynamic = {
            "matching.numTaskqueueReadPartitions": 1,
            "matching.numTaskqueueWritePartitions": 1,
            "history.transferProcessorMaxPollRPS": 1000,
            "history.timerProcessorMaxPollRPS": 1000,
            "history.visibilityProcessorMaxPollRPS": 1000,
        }
        args = [self.cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(self.port),
                "--db-filename", str(state / "temporal.db"), "--log-level", "error"]
        for key, value in dynamic.items():
            args += ["--dynamic-config-value", f"{key}={value}"]
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        _wait_for(self._answers, f"the Temporal dev server at {self.address}")

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"the dev server exited ({self.process.returncode}); see its log")
        return subprocess.run([self.cli, "operator", "namespace", "describe", "--address", self.address, "-n", "default"],
                              capture_output=True).returncode == 0

    def create_endpoint(self, name: str, task_queue: str) -> None:
        # As docs/contract says for a server tablefate did not start.
        subprocess.run([self.cli, "operator", "nexus", "endpoint", "create", "--address", self.address, "--name", name,
                        "--target-namespace", "default", "--target-task-queue", task_queue], check=True, capture_output=True)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


class TablefateWorker:
    """``tablefate worker`` of this checkout; ``kill`` is a SIGKILL, ``start`` again takes up the same state."""

    def __init__(self, server: Server, state: Path):
        self.server = server
        self.home = state / "home"
        self.log_path = state / "worker.log"
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> None:
        env = {**os.environ, "TABLEFATE_HOME": str(self.home), "TEMPORAL_ADDRESS": self.server.address,
               "TABLEFATE_LOG_LEVEL": "info", "TABLEFATE_LOG_FORMAT": "json"}
        log = open(self.log_path, "ab")
        start = log.tell()
        self.process = subprocess.Popen(["node", str(ROOT / "bin" / "tablefate.js"), "worker"], env=env, stdout=log,
                                        stderr=subprocess.STDOUT, cwd=ROOT)
        log.close()

        def polling() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"tablefate worker exited ({self.process.returncode}): {self.log_path.read_text()[-2000:]}")
            with open(self.log_path, "rb") as f:
                f.seek(start)
                return b"worker polling" in f.read()

        _wait_for(polling, "the tablefate worker to poll", timeout=120)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.fixture(scope="session")
def state() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="tablefate-python-") as d:
        yield Path(d)


@pytest.fixture(scope="session")
def server(state: Path) -> Iterator[Server]:
    s = Server(state)
    s.create_endpoint(ENDPOINT, TASK_QUEUE)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def worker(server: Server, state: Path) -> Iterator[TablefateWorker]:
    w = TablefateWorker(server, state)
    w.start()
    yield w
    w.stop()


@pytest.fixture(scope="session")
async def client(server: Server, worker: TablefateWorker) -> Client:
    return await Client.connect(server.address, namespace="default")
