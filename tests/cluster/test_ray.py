"""Ray on a local cluster of two nodes on loopback (`ray start --head --node-ip-address 127.0.0.1` and a second
`ray start --address`, two CPUs and a small object store each): README's Ray Data example, run exactly as README
writes it (its model shipped as the job's working_dir), gives the rows `vit classify --json` gives; deploy/ray's
Ray Serve application answers as `vit serve`'s /v1/classify does and scales to two replicas under load; nothing
of the cluster listens beyond loopback. Every Ray process the test started is ended on every path (by the pids
of its `ray start --block` sessions and of the processes under its own temporary folder). CTest labels ray,
cluster, slow; CTest runs it in a network namespace of its own, holding only loopback (tests/CMakeLists.txt)."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import requests

from cluster_util import (DEIT, PHOTOS, REPO, VIT_BINARY, Group, descendants, free_ports, interfaces, listening,
                          not_loopback, require, require_shared_data)

BIN = pathlib.Path(sys.executable).parent  # .venv/bin: ray, serve
PHOTO_COUNT = 24


def ours(folder):
    """The pids of the processes whose command line names folder (the cluster's own temporary folder)."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if folder.encode() in pathlib.Path(f"/proc/{p}/cmdline").read_bytes():
                    out.append(int(p))
            except OSError:
                pass
    return out


@pytest.fixture(scope="module")
def cluster():
    require_shared_data()
    # Ray takes --node-ip-address 127.0.0.1 for the machine's own address when it has another, and then listens
    # on every interface: CTest runs this file in a network namespace holding only loopback (unshare).
    assert interfaces() == ["lo"], (f"interfaces {interfaces()}: run this through CTest (ctest -L ray), which gives "
                                    "it a network namespace of its own with loopback only")
    require((BIN / "ray").exists(), f"Ray is not installed in {BIN} (scripts/setup.sh installs it)")
    require(subprocess.run([sys.executable, "-c", "import vit"], capture_output=True).returncode == 0,
            "the vit Python module does not import (PYTHONPATH: the build tree's python/)")
    tmp = tempfile.mkdtemp(prefix="vit-ray-", dir="/tmp")  # short: Ray's socket paths live under it
    (gcs, client), head_workers, node_workers = free_ports(2), free_ports(40), free_ports(40)
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_DEDUP_LOGS="0")
    # Two CPUs a node: README's example runs two actors of one CPU and its reading tasks beside them.
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--object-store-memory", str(96 << 20),
              "--disable-usage-stats", "--block"]
    nodes = []
    try:
        nodes.append(Group([str(BIN / "ray"), "start", "--head", "--port", str(gcs), "--temp-dir", tmp,
                            "--include-dashboard", "false", "--ray-client-server-port", str(client),
                            "--min-worker-port", str(head_workers[0]), "--max-worker-port", str(head_workers[-1]),
                            *common], env=env))
        nodes[0].wait_for("Ray runtime started", 120)
        nodes.append(Group([str(BIN / "ray"), "start", "--address", f"127.0.0.1:{gcs}",
                            "--min-worker-port", str(node_workers[0]), "--max-worker-port", str(node_workers[-1]),
                            *common], env=env))
        nodes[1].wait_for("Ray runtime started", 120)
        alive = "import ray; ray.init(); print(sum(n['Alive'] for n in ray.nodes()))"
        address = f"127.0.0.1:{gcs}"
        deadline = time.monotonic() + 60
        while subprocess.run([sys.executable, "-c", alive], capture_output=True, text=True, timeout=120,
                             env=dict(env, RAY_ADDRESS=address)).stdout.strip().split()[-1:] != ["2"]:
            assert time.monotonic() < deadline, "the second node never joined"
            time.sleep(1)
        yield {"address": address, "env": dict(env, RAY_ADDRESS=address), "tmp": tmp, "nodes": nodes}
    finally:
        for n in nodes:
            n.stop(grace=30)
        for pid in ours(tmp):  # anything of the cluster still running
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


def cluster_pids(c):
    return sorted(set(ours(c["tmp"])) | {p for n in c["nodes"] for p in descendants(n.proc.pid)})


def readme_ray_example():
    text = (REPO / "README.md").read_text()
    start = text.index("The same Classifier under Ray Data")
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


def cli_rows(files):
    out = subprocess.run([VIT_BINARY, "classify", "--json", "-k", "5", "-m", str(DEIT), *map(str, files)],
                         capture_output=True, text=True, timeout=600).stdout
    return {pathlib.Path(json.loads(l)["file"]).name: json.loads(l) for l in out.splitlines()}


def job_folder(name):
    """A folder for a job, in the build tree (what runs from it is the project's own), emptied first."""
    folder = pathlib.Path(VIT_BINARY).parent / name
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def test_ray_data_readme_example(cluster):
    """README's block, as written, from a folder holding photos/ (24 sample photos and a broken file) and
    weights/deit_tiny_patch16_224.fb_in1k: labels/*.json hold one row per file, each as `vit classify --json`."""
    job = job_folder("ray-data-job")
    (job / "photos").mkdir(parents=True)
    files = sorted(PHOTOS.glob("*.JPEG"))[:PHOTO_COUNT]
    for f in files:
        shutil.copy(f, job / "photos" / f.name)
    (job / "photos" / "broken.jpg").write_bytes(b"\xff\xd8 not a JPEG")
    shutil.copytree(DEIT, job / "weights" / DEIT.name)
    (job / "example.py").write_text(readme_ray_example())
    t0 = time.monotonic()
    try:
        run = subprocess.run([sys.executable, "example.py"], cwd=job, env=cluster["env"], capture_output=True,
                             text=True, timeout=600)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"README's example did not finish in 600 s:\n{(e.stderr or b'')[-5000:].decode()}")
    assert run.returncode == 0, run.stderr[-5000:]
    print(f"\nREADME's Ray Data example on two nodes: {PHOTO_COUNT + 1} files in {time.monotonic() - t0:.1f} s")
    rows = [json.loads(l) for f in sorted((job / "labels").glob("*.json")) for l in f.read_text().splitlines()]
    got = {pathlib.Path(r["file"]).name: r for r in rows}
    assert len(rows) == PHOTO_COUNT + 1 and len(got) == len(rows)
    want = cli_rows([job / "photos" / f.name for f in files] + [job / "photos" / "broken.jpg"])
    for name, w in want.items():
        if "error" in w:
            assert got[name]["label"] is None and got[name]["error"] == w["error"], (name, got[name], w)
        else:
            assert got[name]["label"] == w["top"][0]["label"] and got[name]["error"] is None, (name, got[name], w)


def classify(url, body, topk=5):
    r = requests.post(url, data=body, params={"topk": topk}, headers={"Content-Type": "image/jpeg"}, timeout=120)
    return r.status_code, r.json()


def serve_status(cluster):
    code = ("import ray; from ray import serve; ray.init(); s = serve.status(); "
            "d = s.applications['vit'].deployments['Classifier']; "
            "print(d.replica_states.get('RUNNING', 0))")
    r = subprocess.run([sys.executable, "-c", code], env=cluster["env"], capture_output=True, text=True, timeout=120)
    return int(r.stdout.strip().split()[-1]) if r.returncode == 0 and r.stdout.strip() else -1


def test_ray_serve_equals_vit_serve(cluster):
    """deploy/ray's application run with `serve run` from a folder holding vit_ray/ and the model: its
    answers equal `vit serve`'s /v1/classify (indices and labels, probabilities within 1e-6), a broken image is
    400 from both, and under 8 clients it runs two replicas, one on each node."""
    serve_port, vit_port = free_ports(2)
    job = job_folder("ray-serve-job")
    shutil.copytree(REPO / "deploy" / "ray" / "vit_ray", job / "vit_ray")
    shutil.copytree(DEIT, job / DEIT.name)
    start = subprocess.run([str(BIN / "serve"), "start", "--address", cluster["address"], "--http-host", "127.0.0.1",
                            "--http-port", str(serve_port)], env=cluster["env"], capture_output=True, text=True,
                           timeout=300)
    assert start.returncode == 0, start.stderr[-3000:]
    app = Group([str(BIN / "serve"), "run", "--address", cluster["address"], "--working-dir", ".", "--name", "vit",
                 "vit_ray.app:build", f"model={DEIT.name}", "threads=1"], env=cluster["env"], cwd=job)
    server = Group([VIT_BINARY, "serve", "-m", str(DEIT), "--port", str(vit_port)])
    try:
        server.wait_for("vit serve: ready", 120)
        url = f"http://127.0.0.1:{serve_port}/"
        deadline = time.monotonic() + 180
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{serve_port}/-/routes", timeout=5).json().get("/") == "vit":
                    break
            except (requests.RequestException, ValueError):
                pass
            assert app.proc.poll() is None and time.monotonic() < deadline, app.text()[-3000:]
            time.sleep(0.5)
        photos = sorted(PHOTOS.glob("*.JPEG"))[30:38]
        for f in photos:
            code, got = classify(url, f.read_bytes(), topk=3)
            want_code, want = classify(f"http://127.0.0.1:{vit_port}/v1/classify", f.read_bytes(), topk=3)
            assert code == want_code == 200, (got, want)
            assert [(t["index"], t["label"]) for t in got["top"]] == [(t["index"], t["label"]) for t in want["top"]]
            assert max(abs(a["prob"] - b["prob"]) for a, b in zip(got["top"], want["top"])) <= 1e-6
        code, got = classify(url, b"not an image")
        want_code, want = classify(f"http://127.0.0.1:{vit_port}/v1/classify", b"not an image")
        assert code == want_code == 400 and got["error"] and want["error"], (got, want)
        assert serve_status(cluster) == 1
        # Autoscaling on ongoing requests: 8 clients for up to 60 s, until a second replica runs.
        stop, results = threading.Event(), []

        def client():
            while not stop.is_set():
                results.append(classify(url, photos[len(results) % len(photos)].read_bytes())[0])

        threads = [threading.Thread(target=client, daemon=True) for _ in range(8)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 90
        while (replicas := serve_status(cluster)) < 2 and time.monotonic() < deadline:
            time.sleep(1)
        stop.set()
        for t in threads:
            t.join(120)
        print(f"\nRay Serve under 8 clients: {replicas} replicas, {len(results)} requests, "
              f"{sum(c != 200 for c in results)} failed")
        assert replicas == 2 and results and all(c == 200 for c in results)
        ports = listening(cluster_pids(cluster))
        assert ports and not not_loopback(ports), not_loopback(ports)
    finally:
        app.stop(grace=60)
        server.stop()


def test_cluster_listens_on_loopback_only(cluster):
    """Every port of every process of the cluster is on loopback: on 127.0.0.1 (Ray's own servers, its node
    address being loopback), or on the wildcard address within this loopback-only namespace."""
    pids = cluster_pids(cluster)
    ports = listening(pids)
    wildcard = sorted((a, p) for a, p in ports if a in ("0.0.0.0", "::"))
    print(f"\n{len(pids)} processes of the cluster listen on {len(ports)} ports, {len(wildcard)} of them on the "
          f"wildcard address (loopback only here): {wildcard}")
    assert len(pids) > 4 and ports, (pids, ports)
    assert not not_loopback(ports), f"listening beyond loopback: {sorted(not_loopback(ports))}"
