"""`vit serve` under load (CTest labels serve and slow): the 250 sample photos from 8 concurrent clients get
what `vit classify --json` gives each photo alone (f32: the same top-5, probabilities within 1e-6; bf16 and
int8: identical), with /metrics counting them; SIGTERM in the middle of such a load answers every request
the server has read, then exits 0."""
import json
import signal
import subprocess
import threading
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from conftest import DEIT, VIT_BINARY, photos

CLIENTS = 8


def cli_top5(precision):
    out = subprocess.run([VIT_BINARY, "classify", "--json", "-k", "5", "-m", str(DEIT), "--precision", precision,
                          str(photos()[0].parent)], capture_output=True, text=True, timeout=300, check=True).stdout
    return {json.loads(l)["file"].rsplit("/", 1)[-1]: [(t["index"], t["prob"]) for t in json.loads(l)["top"]]
            for l in out.splitlines()}


def post_all(url, files, clients=CLIENTS):
    """Each client posts its share of files on its own keep-alive connection: {name: (status, json)}."""
    got, lock = {}, threading.Lock()

    def client(share):
        with requests.Session() as session:
            for f in share:
                r = session.post(url + "/v1/classify?topk=5", data=f.read_bytes(),
                                 headers={"Content-Type": "image/jpeg"}, timeout=120)
                with lock:
                    got[f.name] = (r.status_code, r.json())

    threads = [threading.Thread(target=client, args=(files[i::clients],)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return got


def runs_bf16():
    """Whether the engine runs bf16 here: the precisions `vit inspect` lists for the CPU oneDNN sees."""
    out = subprocess.run([VIT_BINARY, "inspect", str(DEIT)], capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("this CPU"))
    return line.rstrip().endswith(", bf16")


@pytest.mark.parametrize("precision", ["f32", "bf16", "int8"])
def test_250_photos_from_8_clients_equal_vit_classify(serve, precision):
    if precision == "bf16" and not runs_bf16():
        pytest.skip("bf16 needs a CPU with avx512_bf16 or AMX (as oneDNN sees it: ONEDNN_MAX_CPU_ISA counts)")
    s = serve("--precision", precision)
    files = photos()
    assert len(files) == 250
    want = cli_top5(precision)
    got = post_all(s.url, files)
    assert len(got) == 250
    for f in files:
        status, body = got[f.name]
        assert status == 200, (f.name, body)
        top = [(t["index"], t["prob"]) for t in body["top"]]
        assert [i for i, _ in top] == [i for i, _ in want[f.name]], f.name
        for (_, p), (_, q) in zip(top, want[f.name]):
            if precision == "f32":
                assert abs(p - q) <= 1e-6, (f.name, p, q)
            else:
                assert p == q, (f.name, p, q)  # batch-independent by design
    text = requests.get(s.url + "/metrics", timeout=10).text
    m = {(x.name, tuple(sorted(x.labels.items()))): x.value
         for family in text_string_to_metric_families(text) for x in family.samples}
    assert m[("vit_requests_total", (("endpoint", "/v1/classify"), ("status", "200")))] == 250
    assert m[("vit_images_classified_total", ())] == 250
    assert m[("vit_batch_size_sum", ())] == 250
    print(f"{precision}: {m[('vit_batch_size_count', ())]:.0f} forward passes for 250 images, "
          f"mean batch {250 / m[('vit_batch_size_count', ())]:.2f}")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_under_load_answers_every_request_read(serve, sig):
    s = serve("-v")
    files = photos()
    outcomes, lock, stop = [], threading.Lock(), threading.Event()

    def client(i):
        n = i
        while not stop.is_set():
            f = files[n % len(files)]
            n += CLIENTS
            try:  # a fresh connection each time, so no request rides on a connection the drain closes idle
                r = requests.post(s.url + "/v1/classify", data=f.read_bytes(), headers={"Connection": "close"},
                                  timeout=60)
                with lock:
                    outcomes.append(r.status_code)
            except requests.ConnectionError:
                with lock:
                    outcomes.append("refused")
                return

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    time.sleep(2)
    s.signal(sig)
    for t in threads:
        t.join(60)
    stop.set()
    assert s.wait(60) == 0, s.stderr()
    answered = outcomes.count(200)
    assert answered > 0 and set(outcomes) <= {200, "refused"}, outcomes
    # Every answer the server wrote reached its client: the server logs each answer once.
    logged = sum(1 for line in s.stderr_lines if "POST /v1/classify 200" in line)
    assert logged == answered, (logged, answered)
