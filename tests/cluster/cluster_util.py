"""What the cluster tests share: free loopback ports, a process group started for a test and ended on every
path (SIGTERM, then SIGKILL to the group and to every pid it wrote down), and a steady load of clients that
counts each request sent, failed and answered by each replica."""
import collections
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time

import requests

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from listening import descendants, interfaces, listening, not_loopback  # noqa: E402,F401
from shared_data import DEIT, PHOTOS, REPO, VIT_BINARY, require, require_shared_data  # noqa: E402,F401


_given = set()


def free_ports(n):
    """n consecutive TCP ports free on 127.0.0.1 now, none of them given out before by this process."""
    for base in range(20000 + os.getpid() % 20000, 60000, 97):
        if _given & set(range(base, base + n)):
            continue
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            _given.update(range(base, base + n))
            return list(range(base, base + n))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free ports")


class Group:
    """A command started in a session of its own, its output (stdout and stderr) collected; stop() ends it and everything below it:
    SIGTERM to the leader, then SIGKILL to the whole group and to the pids in `pid_files` after `grace` s."""

    def __init__(self, cmd, env=None, pid_files=(), cwd=None):
        self.lines = []
        self.pid_files = pid_files
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, start_new_session=True, cwd=cwd)
        self.reader = threading.Thread(target=lambda: [self.lines.append(l) for l in self.proc.stdout], daemon=True)
        self.reader.start()

    def text(self):
        return "".join(self.lines)

    def wait_for(self, needle, timeout):
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            assert self.proc.poll() is None, f"exited {self.proc.returncode}:\n{self.text()[-3000:]}"
            assert time.monotonic() < deadline, f"no '{needle}' after {timeout} s:\n{self.text()[-3000:]}"
            time.sleep(0.1)

    def stop(self, grace=60, more_pids=()):
        pids = set(more_pids)
        for f in self.pid_files:
            try:
                pids.add(int(pathlib.Path(f).read_text()))
            except (OSError, ValueError):
                pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        for kill in (lambda: os.killpg(self.proc.pid, signal.SIGKILL),
                     *[lambda p=p: os.kill(p, signal.SIGKILL) for p in pids]):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait(30)
        self.reader.join(10)
        return self.proc.returncode


class Load:
    """`clients` threads posting photos to url + path in a loop until stop(); each request's outcome is kept as
    (time, replica or None, status or the exception's text)."""

    def __init__(self, url, clients=4, path="/v1/classify"):
        self.url, self.path = url, path
        self.done = threading.Event()
        self.results, self.lock = [], threading.Lock()
        self.photos = [p.read_bytes() for p in sorted(PHOTOS.glob("*.JPEG"))[:16]]
        self.threads = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(clients)]
        for t in self.threads:
            t.start()

    def client(self, i):
        session = requests.Session()
        k = i
        while not self.done.is_set():
            body = self.photos[k % len(self.photos)]
            k += 1
            try:
                r = session.post(self.url + self.path, data=body, headers={"Content-Type": "image/jpeg"}, timeout=60)
                outcome = (time.monotonic(), r.headers.get("X-Vit-Replica"), r.status_code)
            except requests.RequestException as e:
                outcome = (time.monotonic(), None, f"{type(e).__name__}: {e}")
            with self.lock:
                self.results.append(outcome)

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(90)

    def count(self, since=0.0, until=float("inf")):
        """(sent, failed, {replica: answered}) of the requests that ended in [since, until)."""
        with self.lock:
            rs = [r for r in self.results if since <= r[0] < until]
        failed = [r for r in rs if r[2] != 200]
        return len(rs), failed, collections.Counter(r[1] for r in rs if r[2] == 200)


def haproxy_stat(sock_path):
    """{server name: its row} of the `replicas` backend from HAProxy's admin socket (`show stat`): "status" (UP,
    DOWN, ...), "chkdown" (how often it was marked down), ..."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(str(sock_path))
    s.sendall(b"show stat\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    lines = data.decode().splitlines()
    head = lines[0].lstrip("# ").split(",")
    out = {}
    for line in lines[1:]:
        row = dict(zip(head, line.split(",")))
        if row.get("pxname") == "replicas" and row.get("svname") not in ("BACKEND", None):
            out[row["svname"]] = row
    return out
