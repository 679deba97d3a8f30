"""`vit serve` against a real server on loopback (CTest label serve): health, metadata, /v1/classify
(one image, multipart), KServe v2 infer (BYTES through the binary-data extension, FP32 pixel_values, JSON
and binary outputs), each kind of bad request as a 4xx naming it, /metrics parsed as Prometheus text, the
body limit (Content-Length and chunked), slow and vanishing clients, --max-connections, shutdown, and a warm-up
pass that cannot run stopping start-up."""
import json
import os
import pathlib
import resource
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest
import requests

from conftest import (DEIT, NAME, VIT_BINARY, binary_infer, decode_binary_response, layout_models, metrics, photos,
                      png_bomb, require_shared_data, sanitized_binary, wait_for_metric)

INFER = f"/v2/models/{NAME}/infer"
MODEL = (("model", NAME),)  # the label of the served model's metrics


def cli_json(paths, *args):
    """`vit classify --json` on paths: {file name: [(index, prob), ...]}."""
    out = subprocess.run([VIT_BINARY, "classify", "--json", "-m", str(photos()[0].parents[2] / "models" / NAME),
                          *args, *map(str, paths)], capture_output=True, text=True, timeout=300, check=True).stdout
    return {json.loads(l)["file"].rsplit("/", 1)[-1]: [(t["index"], t["prob"]) for t in json.loads(l)["top"]]
            for l in out.splitlines()}


def raw_request(port, data, read_timeout=10):
    """Sends bytes on a fresh connection and returns all the server sends back before it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as s:
        s.sendall(data)
        got = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
        return got


def test_health_metadata_and_startup_line(serve):
    s = serve()
    assert f"model {NAME}" in s.stderr() and "f32" in s.stderr() and "max batch 16" in s.stderr()
    assert requests.get(s.url + "/v2/health/live", timeout=10).status_code == 200
    assert requests.get(s.url + "/v2/health/ready", timeout=10).json() == {"ready": True}
    assert requests.get(s.url + f"/v2/models/{NAME}/ready", timeout=10).status_code == 200
    meta = requests.get(s.url + f"/v2/models/{NAME}", timeout=10).json()
    assert meta["name"] == NAME
    assert {i["name"]: (i["datatype"], i["shape"]) for i in meta["inputs"]} == {
        "image": ("BYTES", [-1]), "pixel_values": ("FP32", [-1, 3, 224, 224])}
    assert {o["name"] for o in meta["outputs"]} == {"probabilities", "logits", "top_indices", "top_probabilities",
                                                    "embedding"}
    assert "binary_tensor_data" in requests.get(s.url + "/v2", timeout=10).json()["extensions"]


def test_v1_classify_one_image_and_multipart(serve):
    s = serve()
    files = photos()[:3]
    want = cli_json(files, "-k", "3")
    for f in files:
        r = requests.post(s.url + "/v1/classify?topk=3", data=f.read_bytes(),
                          headers={"Content-Type": "image/jpeg"}, timeout=30)
        assert r.status_code == 200, r.text
        got = [(t["index"], t["prob"]) for t in r.json()["top"]]
        assert [i for i, _ in got] == [i for i, _ in want[f.name]]
        assert all(abs(a - b) <= 1e-6 for (_, a), (_, b) in zip(got, want[f.name]))
        assert r.json()["top"][0]["label"]
    parts = [("file", (f.name, f.read_bytes(), "image/jpeg")) for f in files[:2]]
    parts.insert(1, ("file", ("notes.txt", b"not an image", "text/plain")))
    r = requests.post(s.url + "/v1/classify", files=parts, timeout=30)
    assert r.status_code == 200, r.text
    a = r.json()
    assert [e["file"] for e in a] == [files[0].name, "notes.txt", files[1].name]
    assert "not a supported image" in a[1]["error"] and "top" not in a[1]
    assert [t["index"] for t in a[0]["top"]] == [i for i, _ in cli_json(files[:1], "-k", "5")[files[0].name]]


BAD_REQUESTS = [  # method, path, body, headers, status, what the error says
    ("POST", "/v1/classify", b"not an image at all", {}, 400, "not a supported image"),
    ("POST", "/v1/classify?topk=abc", b"x", {}, 400, "topk: 'abc'"),
    ("POST", "/v1/classify?topk=0", b"x", {}, 400, "topk: '0'"),
    ("POST", "/v1/classify", b"", {}, 400, "empty body"),
    ("POST", "/v1/classify", b"{}", {"Content-Type": "application/json"}, 415, "application/json"),
    ("POST", "/v1/classify", b"--x\r\nbroken", {"Content-Type": "multipart/form-data; boundary=x"}, 400, "multipart"),
    ("GET", "/v1/classify", b"", {}, 405, "GET is not allowed"),
    ("DELETE", f"/v2/models/{NAME}", b"", {}, 405, "DELETE is not allowed"),
    ("GET", "/nowhere", b"", {}, 404, "no endpoint /nowhere"),
    ("GET", "/v2/models/resnet50", b"", {}, 404, "no model named 'resnet50'"),
    ("POST", "/v2/models/resnet50/infer", b"{}", {}, 404, "no model named 'resnet50'"),
    ("POST", INFER, b"{\"inputs\": [", {"Content-Type": "application/json"}, 400, "malformed JSON"),
    ("POST", INFER, b"{}", {"Content-Type": "text/plain"}, 415, "text/plain"),
    ("POST", INFER, b"[]", {}, 400, "not a JSON object"),
    ("POST", INFER, json.dumps({"inputs": [{"name": "pixels", "datatype": "FP32", "shape": [1], "data": [0]}]}).encode(),
     {}, 400, "unknown input 'pixels'"),
    ("POST", INFER, json.dumps({"inputs": [{"name": "pixel_values", "datatype": "FP16", "shape": [1, 3, 224, 224],
                                            "data": [0]}]}).encode(), {}, 400, "datatype 'FP16', expected FP32"),
    ("POST", INFER, json.dumps({"inputs": [{"name": "pixel_values", "datatype": "FP32", "shape": [1, 3, 32, 32],
                                            "data": [0] * 3072}]}).encode(), {}, 400, "expected [B, 3, 224, 224]"),
    ("POST", INFER, json.dumps({"inputs": [{"name": "pixel_values", "datatype": "FP32", "shape": [1, 3, 224, 224],
                                            "data": [0, 1]}]}).encode(), {}, 400, "2 numbers, expected 150528"),
    ("POST", INFER, json.dumps({"inputs": [{"name": "image", "datatype": "FP32", "shape": [1], "data": ["x"]}]}).encode(),
     {}, 400, "input 'image' has datatype 'FP32', expected BYTES"),
    ("POST", INFER, json.dumps({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1], "data": ["x"]}],
                                "outputs": [{"name": "labels"}]}).encode(), {}, 400, "unknown output 'labels'"),
    ("POST", INFER, json.dumps({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1], "data": ["x"]}],
                                "parameters": {"topk": 0}}).encode(), {}, 400, "parameters.topk: 0"),
    ("POST", INFER, json.dumps({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1],
                                            "parameters": {"binary_data_size": 100}}]}).encode(), {}, 400,
     "binary_data_size 100"),
    ("POST", "/v1/classify", b"x", {"Content-Encoding": "gzip"}, 415, "Content-Encoding gzip"),
]


def test_bad_requests_are_4xx_naming_the_problem(serve):
    s = serve()
    good = photos()[0].read_bytes()
    for method, path, body, headers, status, fragment in BAD_REQUESTS:
        r = requests.request(method, s.url + path, data=body, headers=headers, timeout=30)
        case = f"{method} {path} {body[:60]!r} {headers}"
        assert r.status_code == status, (case, r.text)
        assert fragment in r.json()["error"], (case, r.json())
        if status == 405:
            assert r.headers["Allow"], case
        # Good requests go on being answered.
        assert requests.post(s.url + "/v1/classify", data=good, timeout=30).status_code == 200, case


def test_kserve_infer_bytes_json_and_binary(serve):
    s = serve()
    files = photos()[3:6]
    want = cli_json(files, "-k", "3")
    body, headers = binary_infer([f.read_bytes() for f in files], topk=3)
    r = requests.post(s.url + INFER, data=body, headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    out = {o["name"]: o for o in r.json()["outputs"]}
    assert set(out) == {"probabilities", "top_indices", "top_probabilities"}
    assert out["probabilities"]["shape"] == [3, 1000] and out["top_indices"]["datatype"] == "INT64"
    for b, f in enumerate(files):
        idx = out["top_indices"]["data"][b * 3:(b + 1) * 3]
        assert idx == [i for i, _ in want[f.name]]
        for k, (_, p) in enumerate(want[f.name]):
            assert abs(out["top_probabilities"]["data"][b * 3 + k] - p) <= 1e-6
            assert abs(out["probabilities"]["data"][b * 1000 + idx[k]] - p) <= 1e-6
        assert abs(sum(out["probabilities"]["data"][b * 1000:(b + 1) * 1000]) - 1) < 1e-4
    # The same as binary outputs, logits included.
    body, headers = binary_infer([f.read_bytes() for f in files], ["logits", "top_indices", "top_probabilities"], 3,
                                 binary_output=True)
    r = requests.post(s.url + INFER, data=body, headers=headers, timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/octet-stream", r.text
    got = decode_binary_response(r)
    assert got["logits"][1] == [3, 1000] and len(got["logits"][2]) == 3000
    assert got["top_indices"][2] == out["top_indices"]["data"]
    assert got["top_probabilities"][2] == pytest.approx(out["top_probabilities"]["data"], abs=1e-7)
    for b in range(3):  # the top logit is the top class
        row = got["logits"][2][b * 1000:(b + 1) * 1000]
        assert row.index(max(row)) == got["top_indices"][2][b * 3]


def test_kserve_bad_image_is_a_400_naming_it(serve):
    s = serve()
    body, headers = binary_infer([photos()[0].read_bytes(), b"\xff\xd8\xff broken jpeg"])
    r = requests.post(s.url + INFER, data=body, headers=headers, timeout=30)
    assert r.status_code == 400 and "input 'image' element 1" in r.json()["error"], r.text
    body, headers = binary_infer([photos()[0].read_bytes()], extra=b"spare")
    r = requests.post(s.url + INFER, data=body, headers=headers, timeout=30)
    assert r.status_code == 400 and "5 bytes of binary data that no input claims" in r.json()["error"]
    raw = struct.pack("<I", 1000) + b"short"
    h = json.dumps({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1],
                                "parameters": {"binary_data_size": len(raw)}}]}).encode()
    r = requests.post(s.url + INFER, data=h + raw, headers={"Inference-Header-Content-Length": str(len(h))}, timeout=30)
    assert r.status_code == 400 and "length 1000 runs past" in r.json()["error"]
    body, headers = binary_infer([photos()[0].read_bytes()] * 2)
    body = body.replace(b'"shape": [2]', b'"shape": [3]')
    r = requests.post(s.url + INFER, data=body, headers=headers, timeout=30)
    assert r.status_code == 400 and "holds 2 elements" in r.json()["error"]


def test_kserve_pixel_values_json_and_binary(serve):
    """pixel_values as the library preprocesses a photo give the photo's answer; JSON and binary alike."""
    vit = pytest.importorskip("vit", reason="the Python module is not built (VIT_BUILD_PYTHON=OFF)")
    import numpy as np
    s = serve()
    f = photos()[7]
    c = vit.Classifier(str(photos()[0].parents[2] / "models" / NAME))
    x = np.asarray(c.preprocess(str(f)), dtype=np.float32).reshape(1, 3, 224, 224)
    want_logits = np.asarray(c.logits(x)).reshape(-1)
    head = {"inputs": [{"name": "pixel_values", "datatype": "FP32", "shape": [1, 3, 224, 224], "data": x.ravel().tolist()}],
            "outputs": [{"name": "logits"}, {"name": "top_indices"}], "parameters": {"topk": 5}}
    r = requests.post(s.url + INFER, json=head, timeout=60)
    assert r.status_code == 200, r.text
    out = {o["name"]: o["data"] for o in r.json()["outputs"]}
    assert np.max(np.abs(np.asarray(out["logits"]) - want_logits)) <= 1e-4
    assert out["top_indices"] == [i for i, _ in cli_json([f], "-k", "5")[f.name]]
    raw = x.astype("<f4").tobytes()
    h = json.dumps({"inputs": [{"name": "pixel_values", "datatype": "FP32", "shape": [1, 3, 224, 224],
                                "parameters": {"binary_data_size": len(raw)}}],
                    "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
    r = requests.post(s.url + INFER, data=h + raw, headers={"Inference-Header-Content-Length": str(len(h))}, timeout=60)
    assert r.status_code == 200, r.text
    assert decode_binary_response(r)["logits"][2] == pytest.approx(out["logits"], abs=1e-6)


def test_metrics_parse_and_count_what_was_sent(serve):
    s = serve()
    for f in photos()[:4]:
        assert requests.post(s.url + "/v1/classify", data=f.read_bytes(), timeout=30).status_code == 200
    for _ in range(3):
        assert requests.post(s.url + "/v1/classify", data=b"junk", timeout=30).status_code == 400
    assert requests.get(s.url + "/v1/classify", timeout=30).status_code == 405
    m = metrics(s.url)
    total = ("vit_requests_total", (("endpoint", "/v1/classify"), ("model", NAME), ("status", "200")))
    assert m[total] == 4
    assert m[("vit_requests_total", (("endpoint", "/v1/classify"), ("model", NAME), ("status", "400")))] == 3
    assert m[("vit_requests_total", (("endpoint", "/v1/classify"), ("status", "405")))] == 1  # before any model
    assert m[("vit_images_classified_total", MODEL)] == 4 and m[("vit_images_failed_total", MODEL)] == 3
    assert m[("vit_batch_size_count", MODEL)] == 7 and m[("vit_batch_size_sum", MODEL)] == 7
    assert m[("vit_queue_wait_seconds_count", MODEL)] == 7
    assert m[("vit_request_duration_seconds_count", (("endpoint", "/v1/classify"), ("model", NAME)))] == 7
    assert m[("vit_request_duration_seconds_count", (("endpoint", "/v1/classify"),))] == 1
    assert m[("vit_queue_depth", MODEL)] == 0


def test_body_limit_from_content_length_before_the_body(serve):
    s = serve("--max-body-mb", "1")
    # Only the header is sent: the answer must come without the body.
    got = raw_request(s.port, b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 413"), got
    assert b"5000000 bytes; at most 1048576" in got and b"Connection: close" in got


def test_chunked_body_is_counted_and_cut_off(serve):
    s = serve("--max-body-mb", "1")
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
        c.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n" % 65536 + b"\0" * 65536 + b"\r\n"
        sent, got = 0, b""
        try:
            for _ in range(64):  # 4 MiB, if the server let it
                c.sendall(chunk)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    break
                got += data
        except ConnectionResetError:
            pass
    assert got.startswith(b"HTTP/1.1 413"), got
    assert b"cut off" in got
    assert requests.get(s.url + "/v2/health/live", timeout=10).status_code == 200


def test_slowloris_and_vanishing_clients_do_not_hold_the_server(serve):
    s = serve("--timeout-s", "2")
    slow = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    closed_after = []

    def drip():  # one byte of header every 0.2 s, never finishing
        t0 = time.monotonic()
        try:
            for b in b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000:
                slow.sendall(bytes([b]))
                time.sleep(0.2)
        except OSError:
            pass
        closed_after.append(time.monotonic() - t0)

    t = threading.Thread(target=drip)
    t.start()
    # Mid-request disconnects: a promised body that never comes, a header cut in half.
    for partial in (b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\npartial",
                    b"POST /v1/classify HTTP/1.1\r\nHo"):
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            c.sendall(partial)
    # Others are served meanwhile.
    for f in photos()[:5]:
        assert requests.post(s.url + "/v1/classify", data=f.read_bytes(), timeout=10).status_code == 200
    t.join(30)
    slow.close()
    # The server cut the slow client off at its 2 s total (sends fail only once the peer has closed,
    # a little later).
    assert closed_after and closed_after[0] < 6, closed_after
    # A client gone before reading its answer.
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
        data = photos()[0].read_bytes()
        c.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    assert requests.post(s.url + "/v1/classify", data=photos()[1].read_bytes(), timeout=10).status_code == 200
    assert s.proc.poll() is None


def test_max_connections_refuses_the_next_with_503(serve):
    """Past --max-connections a request gets 503 (health checks and metrics aside: tests/serve/test_serve_proxy.py)."""
    s = serve("--max-connections", "2")
    # The fixture's readiness checks closed their connections, but the server may count one of them for a
    # moment longer: then the second held connection is the one refused and the third request is served
    # (with Connection: close, so that answer ends too). Hold two afresh until the third is refused.
    deadline = time.monotonic() + 20
    while True:
        held = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(2)]
        time.sleep(0.2)
        got = raw_request(s.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        if got.startswith(b"HTTP/1.1 503") or time.monotonic() > deadline:
            break
        for h in held:
            h.close()
        time.sleep(0.2)
    assert got.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in got and b"--max-connections" in got, got
    for h in held:
        h.close()
    deadline = time.monotonic() + 10
    while requests.get(s.url + "/v2/health/live", timeout=10).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert metrics(s.url)[("vit_connections_refused_total", ())] >= 1


def test_full_queue_answers_503_with_retry_after(serve):
    # With --max-delay-ms 3000 and fewer images than a batch waiting, the queue holds still.
    s = serve("--max-batch", "8", "--max-queue", "8", "--max-delay-ms", "3000")
    data = photos()[0].read_bytes()
    codes = []
    threads = [threading.Thread(target=lambda: codes.append(
        requests.post(s.url + "/v1/classify", data=data, timeout=60).status_code)) for _ in range(7)]
    for t in threads:
        t.start()
    wait_for_metric(s.url, ("vit_queue_depth", MODEL), lambda v: v >= 7, "the requests never queued", 30)
    t0 = time.monotonic()
    r = requests.post(s.url + "/v1/classify", files=[("f", ("a.jpg", data)), ("f", ("b.jpg", data))], timeout=60)
    assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
    assert "queue is full (8 images, --max-queue)" in r.json()["error"]
    assert time.monotonic() - t0 < 2  # at once, not after the queued batch ran
    for t in threads:
        t.join(60)
    assert codes == [200] * 7


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_answers_every_queued_request_then_exits_0(serve, sig):
    # A long --max-delay-ms keeps the requests queued when the signal comes.
    s = serve("--max-delay-ms", "1500", "--max-batch", "16")
    results = []

    def post(f):
        results.append(requests.post(s.url + "/v1/classify", data=f.read_bytes(), timeout=60).status_code)

    threads = [threading.Thread(target=post, args=(f,)) for f in photos()[:6]]
    for t in threads:
        t.start()
    wait_for_metric(s.url, ("vit_queue_depth", MODEL), lambda v: v >= 6, "the requests never queued", 30)
    s.signal(sig)
    for t in threads:
        t.join(60)
    assert s.wait(60) == 0, s.stderr()
    assert results == [200] * 6
    assert sig.name in s.stderr() and "stopped" in s.stderr()
    with pytest.raises(requests.ConnectionError):
        requests.get(s.url + "/v2/health/live", timeout=5)


def test_second_sigint_exits_at_once(serve):
    s = serve("--max-delay-ms", "10000", "--max-batch", "16")
    def post():  # the server's abrupt exit cuts this request off
        with pytest.raises(requests.ConnectionError):
            requests.post(s.url + "/v1/classify", data=photos()[0].read_bytes(), timeout=60)

    t = threading.Thread(target=post, daemon=True)
    t.start()
    wait_for_metric(s.url, ("vit_queue_depth", MODEL), lambda v: v >= 1, "the request never queued", 30)
    s.signal(signal.SIGINT)
    time.sleep(0.3)
    assert s.proc.poll() is None  # draining: the queued request waits for its batch
    t0 = time.monotonic()
    s.signal(signal.SIGINT)
    assert s.wait(10) == 130
    assert time.monotonic() - t0 < 5


def test_bad_flags_exit_2(serve):
    busy = serve()
    for args, fragment in ((["--port", "70000"], "--port"), (["--max-batch", "32", "--max-queue", "8"], "--max-queue"),
                           (["--max-body-mb", "64", "--max-bodies-mb", "32"], "--max-bodies-mb (32) must hold"),
                           (["--max-pixels", "9000000", "--max-queue-mp", "8"], "--max-queue-mp (8) must hold"),
                           (["--max-pixels", "0"], "--max-pixels"),
                           (["--host", "localhost.invalid"], "--host"),
                           (["-m", "a\nb=" + str(DEIT)], 'the model name "a\\nb" holds a control character'),
                           (["--name", "deit\x07"], '--name: the model name "deit\\u0007" holds a control character'),
                           (["--port", str(busy.port)], "cannot listen"),
                           (["--max-patches", "64"], "--max-patches applies to NaFlex models (timm's naflexvit_*, and "
                            "SigLIP towers vit_*_siglip_* made with use_naflex=True, their config.json saying model_args "
                            "use_naflex true)")):
        r = subprocess.run([VIT_BINARY, "serve", "-m", str(photos()[0].parents[2] / "models" / NAME), *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and fragment in r.stderr, (args, r.stderr)
        if "model name" in fragment:  # one line: the name's newline is shown escaped, never written raw
            assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr


def processes_in_session(sid):
    """The processes whose session is sid (field 6 of /proc/PID/stat; the command name may hold spaces)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or gone since
        if entry.name.isdigit() and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


def test_warm_up_that_cannot_run_stops_start_up(tmp_path):
    """Under an address-space limit (`ulimit -v 2G`, as a shared host sets one) DeiT-Tiny loads, but the warm-up pass
    of --max-batch 2048 cannot have its memory: vit serve exits 4 with one error line naming the model, the pass and
    the memory, never says ready, and leaves no process behind (its session, of its own, is empty)."""
    require_shared_data()
    if sanitized_binary():  # it reserves terabytes of shadow address space at start, before any limit could hold
        pytest.skip("AddressSanitizer cannot run under an address-space limit; the release build's suite runs this")
    limit = 2 << 30

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.Popen([VIT_BINARY, "serve", "-m", str(DEIT), "--port", "0", "--max-batch", "2048",
                             "--max-queue", "2048"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=limited, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    assert proc.returncode == 4, err
    assert "at http://127.0.0.1:" in err, err  # it had started listening
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        f"error: model {NAME}: the warm-up pass of a batch of 2048 images (--max-batch 2048) failed: out of memory"), err
    assert "ready" not in err and "terminate" not in err, err
    assert processes_in_session(proc.pid) == []


def test_bodies_past_max_bodies_mb_get_503_before_they_are_read(serve):
    """Two requests holding 0.9 MiB each of a 2 MiB budget (their bodies still coming): a third one's header gets 503
    and Retry-After at once, its body unread, and so does a chunked body once its chunks pass the budget; when the two
    end, requests are served again."""
    s = serve("--max-bodies-mb", "2", "--max-body-mb", "1", "--timeout-s", "20")
    n = 900 * 1024
    held = []
    for _ in range(2):
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n + b"\0" * 1000)
        held.append(c)
    wait_for_metric(s.url, ("vit_body_bytes_held", ()), lambda v: v >= 2 * n, "the two bodies were never held", 10)
    got = raw_request(s.port, b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in got and b"--max-bodies-mb" in got, got
    assert b"Connection: close" in got
    with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
        c.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        got = b""
        try:
            for _ in range(8):
                c.sendall(b"%x\r\n" % 65536 + b"\0" * 65536 + b"\r\n")
            while True:
                data = c.recv(65536)
                if not data:
                    break
                got += data
        except (BrokenPipeError, ConnectionResetError):
            pass
    assert got.startswith(b"HTTP/1.1 503") and b"--max-bodies-mb" in got, got
    for c in held:
        c.close()
    wait_for_metric(s.url, ("vit_body_bytes_held", ()), lambda v: v <= 0,
                    "the closed requests' bodies were never given back", 10)
    r = requests.post(s.url + "/v1/classify", data=photos()[0].read_bytes(), timeout=30)
    assert r.status_code == 200, r.text


def test_image_over_max_pixels_is_a_400_from_its_header(serve):
    s = serve("--max-pixels", "4000000", "--max-queue-mp", "4")
    r = requests.post(s.url + "/v1/classify", data=png_bomb(2001, rgba16=False), timeout=30)
    assert r.status_code == 400 and "2001x2001 = 4004001 pixels is over the limit of 4000000 (--max-pixels)" in r.json()["error"], r.text
    assert metrics(s.url)[("vit_queued_pixels", ())] == 0
    assert requests.post(s.url + "/v1/classify", data=photos()[0].read_bytes(), timeout=30).status_code == 200


def test_served_name_is_the_folder_name_and_errors_hide_the_model_path(serve, tmp_path):
    """Every layout's folder serves under its own name (OpenCLIP's folder too, whose weights file is
    open_clip_model.safetensors), as does the weights file of a folder and a folder with a trailing slash;
    what a headless model answers /v1/classify and infer names neither the server's paths nor its files."""
    models = layout_models()
    for folder in ("openclip", "hf_dinov2"):
        s = serve(model=models / folder)
        assert f"model {folder} " in s.stderr(), s.stderr()
        assert requests.get(s.url + f"/v2/models/{folder}", timeout=10).json()["name"] == folder
        body, headers = binary_infer([photos()[0].read_bytes()], ["probabilities"])
        for r, fragment in ((requests.post(s.url + "/v1/classify", data=photos()[0].read_bytes(), timeout=30),
                             "no classifier head"),
                            (requests.post(s.url + f"/v2/models/{folder}/infer", data=body, headers=headers, timeout=30),
                             "unknown output 'probabilities'; this model gives embedding")):
            assert r.status_code == 400, r.text
            assert str(models) not in r.text and ".safetensors" not in r.text, r.text
            assert fragment in r.json()["error"]
        s.kill()
    link = tmp_path / "my-deit"
    link.mkdir()
    for f in DEIT.iterdir():
        (link / f.name).symlink_to(f)
    for model, name in ((str(link) + "/", "my-deit"), (link / "model.safetensors", "my-deit")):
        s = serve(model=model)
        assert f"model {name} " in s.stderr(), s.stderr()
        assert requests.get(s.url + f"/v2/models/{name}/ready", timeout=10).status_code == 200
        s.kill()


def test_kserve_hostile_json_is_a_400_and_the_server_goes_on(serve):
    """JSON that would hold many times its size as a tree (nesting a million deep, 100 000 values outside tensor data,
    more BYTES elements than the queue), invalid UTF-8, and tensor data of the wrong kind: each a 400 naming it."""
    s = serve()
    image = {"name": "image", "datatype": "BYTES", "shape": [1]}
    cases = [
        (b'{"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1], "data": ' + b"[" * 1_000_000 +
         b"]" * 1_000_000 + b"}]}", "nested deeper than 32 levels"),
        (json.dumps({"inputs": [dict(image, data=["x"])], "parameters": {"extra": [0] * 100_000}}).encode(),
         "more than 4096 values"),
        (json.dumps({"inputs": [dict(image, shape=[300], data=["x"] * 300)]}).encode(), "more than 256 elements"),
        (b'{"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1], "data": ["\xff\xfe"]}]}', "malformed JSON"),
        (json.dumps({"inputs": [dict(image, data=[{"b64": "x"}])]}).encode(), "'data' holds an object"),
        (json.dumps({"inputs": [dict(image, data=[1])]}).encode(), "input 'image' holds numbers"),
        (json.dumps({"inputs": [{"name": "pixel_values", "datatype": "FP32", "shape": [1, 3, 224, 224],
                                 "data": ["x"]}]}).encode(), "input 'pixel_values' holds strings"),
    ]
    for body, fragment in cases:
        r = requests.post(s.url + INFER, data=body, headers={"Content-Type": "application/json"}, timeout=60)
        assert r.status_code == 400 and fragment in r.json()["error"], (fragment, r.text[:300])
        assert requests.post(s.url + "/v1/classify", data=photos()[0].read_bytes(), timeout=30).status_code == 200
    # Tensor data nested as its shape is flattened in order, as before.
    rows = [[["x"]]]
    r = requests.post(s.url + INFER, json={"inputs": [dict(image, data=rows)]}, timeout=30)
    assert r.status_code == 400 and "input 'image' element 0: " in r.json()["error"], r.text
