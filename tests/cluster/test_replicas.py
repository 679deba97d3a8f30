"""Replicas behind HAProxy as a user runs them (deploy/haproxy/replicas.sh: two `vit serve` on loopback, a core
each, HAProxy health-checking /v2/health/ready): under a steady load from four clients, a replica killed with
SIGKILL costs no request (HAProxy's layer-7 retries land on the other), is marked down, is started again by
the script and rejoins once ready; a replica stopped with SIGTERM drains (503 on readiness for --drain-grace-s
while it still serves, then it stops) with no failed request. Every request sent, failed and answered by each
replica is printed. Everything listens on loopback; the balancer and the replicas are stopped on every path.
CTest label cluster."""
import os
import shutil
import signal
import time

import pytest

from cluster_util import (DEIT, REPO, VIT_BINARY, Group, Load, descendants, free_ports, haproxy_stat, listening,
                          not_loopback, require, require_shared_data)


@pytest.fixture
def replicas(tmp_path):
    require_shared_data()
    require(shutil.which("haproxy") and shutil.which("curl"), "haproxy or curl is not installed (scripts/setup.sh installs them)")
    lb, first, _ = free_ports(3)
    run = tmp_path / "run"
    env = dict(os.environ, VIT=VIT_BINARY)
    g = Group([str(REPO / "deploy" / "haproxy" / "replicas.sh"), "-n", "2", "-m", str(DEIT), "--port", str(lb),
               "--first-port", str(first), "--run-dir", str(run), "--drain-grace-s", "3"],
              env=env, pid_files=[run / "replica-1.pid", run / "replica-2.pid", run / "haproxy.pid"])
    try:
        g.wait_for(") ready behind", 180)
        g.url, g.run = f"http://127.0.0.1:{lb}", run
        yield g
    finally:
        code = g.stop()
        print(f"replicas.sh exit {code}; its log:\n{g.text()[-2000:]}")


def down_count(run, server):
    return int(haproxy_stat(run / "haproxy.sock")[server]["chkdown"])


def wait_status(run, server, want, timeout, downs=None):
    """Waits until HAProxy has the server `want`: "UP", or "DOWN": marked down more often than `downs` times
    (however briefly: the script may have started it again already)."""
    deadline = time.monotonic() + timeout
    while True:
        row = haproxy_stat(run / "haproxy.sock")[server]
        if (want == "DOWN" and int(row["chkdown"]) > downs) or (want == "UP" and row["status"] == "UP"):
            return time.monotonic()
        assert time.monotonic() < deadline, f"{server} is {row['status']}, not {want}, after {timeout} s"
        time.sleep(0.05)


def retried(run):
    """The requests HAProxy's log shows retried on another replica (the last of its five connection counts,
    "+N" when redispatched)."""
    lines = [l.split() for l in (run / "haproxy.log").read_text().splitlines() if '"POST ' in l]
    return sum(1 for f in lines if len(f) > 10 and f[10].split("/")[-1].startswith("+"))


def report(what, load, marks):
    """Prints sent, failed and answered per replica for each phase between the marks; returns the failures."""
    failed_all = []
    print(f"\n{what}:")
    for (name, t0), (_, t1) in zip(marks, marks[1:]):
        sent, failed, by = load.count(t0, t1)
        failed_all += failed
        print(f"  {name:28} sent {sent:5}  failed {len(failed):3}  answered " +
              ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
    sent, failed, by = load.count()
    print(f"  {'all':28} sent {sent:5}  failed {len(failed):3}  answered " +
          ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
    return failed_all, sent


def test_loopback_only(replicas):
    pids = descendants(replicas.proc.pid)
    ports = listening(pids)
    assert len(ports) >= 3 and not not_loopback(ports), ports


def under_load(replicas, server, sig, then):
    """Four clients post photos through the balancer; 3 s in, `sig` goes to replica `server` (r1, r2), which
    HAProxy must mark down; then(pid) waits for what follows; 4 s more of load. Returns the Load and the times
    (start, signal, marked down, then() returned, end)."""
    run = replicas.run
    load = Load(replicas.url, clients=4)
    try:
        t0 = time.monotonic()
        time.sleep(3)
        pid = int((run / f"replica-{server[1:]}.pid").read_text())
        downs = down_count(run, server)  # its warm-up counted already
        t_sig = time.monotonic()
        os.kill(pid, sig)
        t_down = wait_status(run, server, "DOWN", 15, downs)
        then(pid)
        t_then = time.monotonic()
        time.sleep(4)
    finally:
        load.stop()
    return load, (t0, t_sig, t_down, t_then, time.monotonic())


def test_sigkill_replica_no_request_fails(replicas):
    run = replicas.run
    load, (t0, t_kill, t_down, t_up, t_end) = under_load(replicas, "r1", signal.SIGKILL,
                                                         lambda pid: wait_status(run, "r1", "UP", 120))
    failed, sent = report("SIGKILL of replica r1 under 4 clients", load,
                          [("before the kill", t0), ("kill to marked down", t_kill), ("down to back up", t_down),
                           ("after it rejoined", t_up), ("", t_end)])
    print(f"  requests HAProxy retried on the other replica: {retried(run)}")
    assert sent > 20 and not failed, failed[:5]
    assert retried(run) > 0  # the requests in flight to it, and those sent before it was marked down
    _, _, after = load.count(t_up, t_end)
    assert after["r1"] > 0 and after["r2"] > 0, after  # it rejoined and takes requests again
    # (Requests can end on it while it is marked down: the restarted process listens before it is ready, and a
    # request HAProxy sent it then, before its second failed check, waits behind its warm-up and is answered.)
    assert "replica 1 ended" in replicas.text()


def test_sigterm_replica_drains(replicas):
    run = replicas.run

    def stopped(pid):
        deadline = time.monotonic() + 60
        while os.path.exists(f"/proc/{pid}") and "replica 2 drained" not in replicas.text():
            assert time.monotonic() < deadline, "replica 2 never stopped"
            time.sleep(0.1)

    load, (t0, t_term, t_down, t_gone, t_end) = under_load(replicas, "r2", signal.SIGTERM, stopped)
    failed, sent = report("SIGTERM of replica r2 under 4 clients (--drain-grace-s 3)", load,
                          [("before SIGTERM", t0), ("SIGTERM to marked down", t_term),
                           ("down to stopped", t_down), ("after it stopped", t_gone), ("", t_end)])
    print(f"  requests HAProxy retried on the other replica: {retried(run)}")
    assert sent > 20 and not failed, failed[:5]
    _, _, grace = load.count(t_term, t_down)
    assert grace["r2"] > 0, grace  # still serving while its readiness said 503
    _, _, after = load.count(t_gone, t_end)
    assert after["r2"] == 0 and after["r1"] > 0, after
    assert t_down - t_term < 3 + 1, "marked down only after the grace"
    assert "replica 2 drained and stopped" in replicas.text()
