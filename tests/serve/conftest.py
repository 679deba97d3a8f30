"""What the `vit serve` tests share: the real server on a free loopback port, started per test and always
killed when the test ends (pass, fail or timeout), and the sample photos. CTest (labels serve, slow) sets
VIT_BINARY; the DeiT-Tiny weights and photos come from ../shared/data."""
import os
import pathlib
import re
import signal
import subprocess
import threading
import time

import pytest
import requests

REPO = pathlib.Path(os.environ.get("VIT_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
SHARED = pathlib.Path(os.environ.get("VIT_SHARED_DATA", REPO.parent / "shared" / "data"))
VIT_BINARY = os.environ.get("VIT_BINARY", str(REPO / "build" / "vit"))
DEIT = SHARED / "models" / "deit_tiny_patch16_224.fb_in1k"
PHOTOS = SHARED / "images" / "imagenet-samples"
NAME = "deit_tiny_patch16_224.fb_in1k"


def require_shared_data():
    """Skips without ../shared/data, except under CI=true, where missing data is a failure."""
    if DEIT.is_dir() and PHOTOS.is_dir():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but the test data is missing: {SHARED}")
    pytest.skip(f"test data not found at {SHARED} (set VIT_SHARED_DATA); skipping")


def photos():
    return sorted(PHOTOS.glob("*.JPEG"))


class Server:
    """`vit serve ARGS --port 0`: waits for its start-up line and readiness; kill() is safe to call twice."""

    def __init__(self, *args, ready=True, timeout=120):
        self.stderr_lines = []
        self.proc = subprocess.Popen([VIT_BINARY, "serve", "-m", str(DEIT), "--port", "0", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.port = None
        found = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.stderr_lines.append(line)
                m = re.search(r"at http://127\.0\.0\.1:(\d+),", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    found.set()
            found.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not found.wait(timeout) or self.port is None:
            self.kill()
            raise AssertionError("no start-up line from vit serve:\n" + "".join(self.stderr_lines))
        self.url = f"http://127.0.0.1:{self.port}"
        try:
            deadline = time.monotonic() + timeout
            while ready and requests.get(self.url + "/v2/health/ready", timeout=10).status_code != 200:
                assert time.monotonic() < deadline, "the server never became ready"
                time.sleep(0.05)
        except BaseException:  # the fixture never sees this server: end it here
            self.kill()
            raise

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait(self, timeout=60):
        code = self.proc.wait(timeout)
        self.reader.join(10)
        return code

    def stderr(self):
        return "".join(self.stderr_lines)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture
def serve():
    """serve(*args) starts a server; every server started is killed when the test ends, however it ends."""
    started = []

    def start(*args, **kw):
        require_shared_data()
        s = Server(*args, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.kill()
