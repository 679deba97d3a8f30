"""Throughput of `vit serve` past one process, from N client threads on loopback for a fixed time each:
  protocols  KServe v2 infer over HTTP (tritonclient.http, binary tensors) against the same over gRPC
             (tritonclient.grpc), one photo a request, one server with --grpc-port: images/s, p50/p99 latency and
             the gRPC / HTTP ratio
  replicas   POST /v1/classify through HAProxy to 1 and then 2 replicas (deploy/haproxy/replicas.sh, the cores
             split between them): images/s each and the ratio
Clients and servers share this machine's cores, so the figures are the machine's, not the protocol's alone.
No assertion: a benchmark, not a test.

    .venv/bin/python scripts/cluster_bench.py [protocols|replicas|all] [--clients 16] [--seconds 20]
"""
import argparse
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

REPO = pathlib.Path(__file__).resolve().parents[1]
MODEL = REPO.parent / "shared" / "data" / "models" / "deit_tiny_patch16_224.fb_in1k"
PHOTOS = sorted((REPO.parent / "shared" / "data" / "images" / "imagenet-samples").glob("*.JPEG"))[:32]
VIT = os.environ.get("VIT", str(REPO / "build" / "vit"))
NAME = MODEL.name


def run_clients(clients, seconds, call):
    """Runs call(thread index, photo bytes) from `clients` threads for `seconds`: (images/s, p50 ms, p99 ms, errors)."""
    photos = [p.read_bytes() for p in PHOTOS]
    latencies, errors, stop = [], [0], threading.Event()

    def worker(i):
        k = i
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                call(i, photos[k % len(photos)])
                latencies.append(time.perf_counter() - t0)
            except Exception:  # counted, as wrk counts non-2xx answers
                errors[0] += 1
            k += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    lat = np.array(latencies) * 1e3
    return len(latencies) / elapsed, float(np.percentile(lat, 50)), float(np.percentile(lat, 99)), errors[0]


def protocols(clients, seconds):
    proc = subprocess.Popen([VIT, "serve", "-m", str(MODEL), "--port", "0", "--grpc-port", "0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "gRPC" not in line:
            line = proc.stderr.readline()
        http_port, grpc_port = re.search(r"http://127\.0\.0\.1:(\d+),.*gRPC at 127\.0\.0\.1:(\d+),", line).groups()
        while requests.get(f"http://127.0.0.1:{http_port}/v2/health/ready", timeout=5).status_code != 200:
            time.sleep(0.1)
        # A client per thread, made afresh for each run (a kept-alive connection idle through the other
        # protocol's run may have been closed by the server meanwhile).
        made = {"HTTP": lambda: httpclient.InferenceServerClient(f"127.0.0.1:{http_port}"),
                "gRPC": lambda: grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")}

        def infer(module, client, body):
            inp = module.InferInput("image", [1], "BYTES")
            data = np.array([body], dtype=np.object_)
            inp.set_data_from_numpy(data, **({"binary_data": True} if module is httpclient else {}))
            out = module.InferRequestedOutput("top_indices", **({"binary_data": True} if module is httpclient else {}))
            client.infer(NAME, [inp], outputs=[out], parameters={"topk": 5})

        results = {}
        for label, module in (("HTTP", httpclient), ("gRPC", grpcclient)) * 2:
            cs = [made[label]() for _ in range(clients)]
            r = run_clients(clients, seconds, lambda i, body: infer(module, cs[i], body))
            for c in cs:
                c.close()
            results.setdefault(label, []).append(r)
            print(f"{label:5} {clients} clients: {r[0]:7.1f} images/s  p50 {r[1]:6.1f} ms  p99 {r[2]:6.1f} ms  "
                  f"errors {r[3]}", flush=True)
        best = {k: max(v) for k, v in results.items()}
        print(f"gRPC / HTTP: {best['gRPC'][0] / best['HTTP'][0]:.3f} (the better of two runs each); load average "
              f"now {os.getloadavg()[0]:.1f}")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)


def free_port_base(n):
    for base in range(31000, 60000, 53):
        try:
            socks = [socket.create_server(("127.0.0.1", p)) for p in range(base, base + n)]
        except OSError:
            continue
        for s in socks:
            s.close()
        return base
    raise SystemExit("no free ports")


def replicas(clients, seconds):
    rates = {}
    for n in (1, 2):
        base = free_port_base(n + 1)
        g = subprocess.Popen([str(REPO / "deploy" / "haproxy" / "replicas.sh"), "-n", str(n), "-m", str(MODEL),
                              "--port", str(base), "--first-port", str(base + 1)], stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, VIT=VIT), start_new_session=True)
        try:
            while "ready behind" not in g.stderr.readline():
                assert g.poll() is None, "replicas.sh ended"
            sessions = [requests.Session() for _ in range(clients)]

            def post(i, body):
                r = sessions[i].post(f"http://127.0.0.1:{base}/v1/classify", data=body,
                                     headers={"Content-Type": "image/jpeg"}, timeout=60)
                r.raise_for_status()

            r = run_clients(clients, seconds, post)
            rates[n] = r[0]
            print(f"{n} replica{'s' if n > 1 else ' '} ({os.cpu_count() // n} threads each), {clients} clients: "
                  f"{r[0]:7.1f} images/s  p50 {r[1]:6.1f} ms  p99 {r[2]:6.1f} ms  errors {r[3]}", flush=True)
        finally:
            g.send_signal(signal.SIGTERM)
            try:
                g.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(g.pid, signal.SIGKILL)
                g.wait(30)
    print(f"2 replicas / 1: {rates[2] / rates[1]:.3f}")
    print(f"load average now: {os.getloadavg()[0]:.1f} (other processes share these cores)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", nargs="?", default="all", choices=["protocols", "replicas", "all"])
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=20)
    a = p.parse_args()
    if not MODEL.is_dir() or not PHOTOS:
        sys.exit(f"no model or photos under {REPO.parent / 'shared' / 'data'}")
    if a.what in ("protocols", "all"):
        protocols(a.clients, a.seconds)
    if a.what in ("replicas", "all"):
        replicas(a.clients, a.seconds)


if __name__ == "__main__":
    main()
