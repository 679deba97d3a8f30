"""`vit serve` as a proxy (nginx with keep-alive) and the clients behind it meet it (CTest label serve): HEAD answered
with GET's headers and never a body, on a kept-alive connection whose next answer stays intact; health checks and
metrics answered past --max-connections while other requests get 503; work whose client went away before its pass
dropped unrun; the request deadline answering 408 (request not yet whole) or 503 (not yet answered) instead of a bare
close; unknown transfer codings refused with 501; CORS off unless --cors-origin names the page's origin; KServe's
version paths. Raw sockets where the bytes on the wire are the point."""
import json
import socket
import subprocess
import time
import uuid

import requests

from conftest import DEIT, NAME, VIT_BINARY, metrics, photos, wait_for_metric

MODEL = (("model", NAME),)


class Connection:
    """One client connection read answer by answer: (status, headers in lower case, body)."""

    def __init__(self, port, timeout=30):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def _more(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("the server closed the connection; read so far: %r" % self.buf[:300])
        self.buf += chunk

    def answer(self, head=False):
        """The next answer; head: an answer to HEAD, whose Content-Length announces a body that never comes."""
        while b"\r\n\r\n" not in self.buf:
            self._more()
        assert self.buf.startswith(b"HTTP/1.1 "), self.buf[:300]  # nothing left over from the answer before
        top, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = top.decode().split("\r\n")
        headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
        n = 0 if head else int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._more()
        body, self.buf = self.buf[:n], self.buf[n:]
        return int(lines[0].split()[1]), headers, body

    def rest(self):
        """Everything the server sends until it closes."""
        try:
            while True:
                self._more()
        except (EOFError, ConnectionResetError):
            pass
        return self.buf

    def close(self):
        self.sock.close()


def raw(port, data, timeout=30):
    """Sends bytes on a fresh connection; all the server sends back before it closes."""
    c = Connection(port, timeout)
    try:
        c.send(data)
        return c.rest()
    finally:
        c.close()


def get(path, close=True):
    return b"GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path.encode(), b"Connection: close\r\n" if close else b"")


def multipart(files):
    boundary = uuid.uuid4().hex.encode()
    body = b"".join(b"--%s\r\nContent-Disposition: form-data; name=\"f\"; filename=\"%s\"\r\n"
                    b"Content-Type: image/jpeg\r\n\r\n%s\r\n" % (boundary, f.name.encode(), f.read_bytes())
                    for f in files) + b"--%s--\r\n" % boundary
    return body, b"multipart/form-data; boundary=" + boundary


def test_head_is_gets_headers_without_a_body_and_the_next_answer_is_intact(serve):
    """HEAD on a GET resource answers GET's status and headers, Content-Length included, and no body; on a path
    without GET (405) or an unknown one (404) no body either. On the one kept-alive connection a proxy would reuse,
    the answer after each HEAD begins where the HEAD's ended."""
    s = serve()
    c = Connection(s.port)
    for path in ("/", "/v2/health/ready", "/v2/health/live", f"/v2/models/{NAME}", "/v1/models", "/nowhere",
                 "/v1/classify"):
        want = requests.get(s.url + path, timeout=30)
        c.send(b"HEAD %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
        status, headers, _ = c.answer(head=True)
        assert status == want.status_code, (path, status)
        assert headers["content-type"] == want.headers["Content-Type"], (path, headers)
        if status == 405:  # its message names the method: "HEAD is not allowed on ..."
            assert headers["allow"] == "POST" and int(headers["content-length"]) == len(want.content) + 1, headers
        else:
            assert headers["content-length"] == str(len(want.content)), (path, headers)
        c.send(get("/v2/health/live", close=False))
        status, _, body = c.answer()  # fails if any byte of a body came after the HEAD's headers
        assert status == 200 and json.loads(body) == {"live": True}, (path, body)
    c.close()


def hold_every_connection(s, n):
    """Opens n idle connections once the server counts exactly them: a request that is not a health check gets 503."""
    deadline = time.monotonic() + 20
    while True:
        held = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(n)]
        time.sleep(0.2)
        if raw(s.port, get("/v1/models")).startswith(b"HTTP/1.1 503"):
            return held
        for h in held:
            h.close()
        assert time.monotonic() < deadline, "the server never counted the held connections"
        time.sleep(0.2)


def test_health_and_metrics_are_answered_past_max_connections(serve):
    """With every connection --max-connections allows held, Kubernetes' probes and Prometheus' scrape are still
    answered (each on a connection closed after its answer); any other request gets 503 with Retry-After in its
    route's form, and is counted as refused."""
    s = serve("--max-connections", "2")
    held = hold_every_connection(s, 2)
    for path in ("/v2/health/live", "/v2/health/ready", f"/v2/models/{NAME}/ready",
                 f"/v2/models/{NAME}/versions/1/ready", "/metrics"):
        got = raw(s.port, get(path, close=False))  # the server closes it anyway
        assert got.startswith(b"HTTP/1.1 200") and b"Connection: close" in got, (path, got[:300])
    data = photos()[0].read_bytes()
    got = raw(s.port, b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    assert got.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in got, got[:300]
    assert json.loads(got.split(b"\r\n\r\n", 1)[1]) == {"error": "too many connections (2, --max-connections); try again shortly"}
    for h in held:
        h.close()
    m = metrics(s.url)
    assert m[("vit_connections_refused_total", ())] >= 2
    assert m[("vit_requests_total", (("endpoint", "/metrics"), ("status", "200")))] >= 1


def test_work_of_clients_gone_before_its_pass_is_dropped(serve):
    """30 requests of 8 photos each, every client closing its connection as soon as its request is sent: the requests
    whose turn comes after their client has gone are dropped unrun (at most the first few run: their turn came while
    their client was still sending), in vit_images_dropped_total; all 30 are counted as 499, answered to no one; the
    next client is answered."""
    s = serve("--max-delay-ms", "200")
    body, ctype = multipart(photos()[:8])
    for _ in range(30):
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as c:
            c.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
                      % (ctype, len(body)) + body)
    t0 = time.monotonic()
    r = requests.post(s.url + "/v1/classify", data=photos()[9].read_bytes(), timeout=120)
    waited = time.monotonic() - t0
    assert r.status_code == 200, r.text
    print(f"the next client waited {waited:.3f} s")  # a figure for people, not an assertion
    # Each of the 30 is answered to no one (499), run or dropped; some may still be read after the next one's answer.
    gone = ("vit_requests_total", (("endpoint", "/v1/classify"), ("model", NAME), ("status", "499")))
    deadline = time.monotonic() + 60
    while (m := metrics(s.url)).get(gone, 0) < 30:
        assert time.monotonic() < deadline, f"the abandoned requests were never all counted: {m.get(gone, 0)}"
        time.sleep(0.05)
    ran = m[("vit_batch_size_sum", MODEL)]
    dropped = m[("vit_images_dropped_total", MODEL)]
    assert dropped >= 27 * 8 and dropped % 8 == 0, (dropped, ran)
    assert ran == 30 * 8 - dropped + 1, (dropped, ran)  # every image either ran or was dropped, none both
    assert m[("vit_images_classified_total", MODEL)] == 1  # only the answer someone read


def test_deadline_answers_408_while_reading_503_while_answering(serve):
    """--timeout-s 1: a request whose header or body has not come whole by then gets 408 (not a bare close); an idle
    kept-alive connection is closed without a word; a request still queued at its deadline (a batch delay of 2.5 s)
    gets 503 with Retry-After, and its work is dropped unrun."""
    s = serve("--timeout-s", "1", "--max-delay-ms", "2500")
    for partial in (b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial",
                    b"GET /v2/health/live HTTP/1.1\r\nHo"):
        got = raw(s.port, partial)
        assert got.startswith(b"HTTP/1.1 408") and b"Connection: close" in got, got
        assert b"did not arrive whole within 1 s (--timeout-s)" in got, got
    assert raw(s.port, b"") == b""  # connected, never asked: closed without an answer
    c = Connection(s.port)
    c.send(get("/v2/health/live", close=False))
    assert c.answer()[0] == 200
    assert c.rest() == b""  # kept alive, then idle past the deadline: closed without another answer
    c.close()
    t0 = time.monotonic()
    r = requests.post(s.url + "/v1/classify", data=photos()[0].read_bytes(), timeout=30)
    assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
    assert r.json() == {"error": "no answer within 1 s (--timeout-s); try again shortly"}
    assert time.monotonic() - t0 < 2.4  # answered at its deadline, before the batch delay ran out
    wait_for_metric(s.url, ("vit_images_dropped_total", MODEL), lambda v: v == 1, "the late request was not dropped", 30)
    assert metrics(s.url)[("vit_batch_size_count", MODEL)] == 0


def test_transfer_codings_besides_chunked_get_501(serve):
    s = serve()
    for coding in (b"gzip, chunked", b"gzip", b"deflate,chunked"):
        got = raw(s.port, b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: %s\r\n\r\n"
                          b"5\r\nhello\r\n0\r\n\r\n" % coding)
        assert got.startswith(b"HTTP/1.1 501"), (coding, got)
        assert b"Transfer-Encoding " + coding.split(b",")[0] + b" is not implemented" in got, got
    data = photos()[0].read_bytes()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)
    got = raw(s.port, b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked)
    assert got.startswith(b"HTTP/1.1 200"), got[:300]


def test_cors_is_off_by_default_and_answers_the_origins_named(serve):
    """Off: a preflight is 405 and no answer carries Access-Control-Allow-Origin. With --cors-origin: the preflight
    of a named origin is 204 naming the path's methods and the headers asked; another origin's is 403; answers to the
    named origin (errors included) carry Access-Control-Allow-Origin, so its page can read them."""
    page = "http://127.0.0.1:8000"
    preflight = {"Origin": page, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    s = serve()
    r = requests.options(s.url + "/v1/embeddings", headers=preflight, timeout=10)
    assert r.status_code == 405 and "Access-Control-Allow-Origin" not in r.headers, r.headers
    r = requests.get(s.url + "/v1/models", headers={"Origin": page}, timeout=10)
    assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers
    s.kill()
    s = serve("--cors-origin", page, "--cors-origin", "https://example.org")
    r = requests.options(s.url + "/v1/embeddings", headers=preflight, timeout=10)
    assert r.status_code == 204 and r.content == b"", r.text
    assert r.headers["Access-Control-Allow-Origin"] == page and r.headers["Vary"] == "Origin"
    assert r.headers["Access-Control-Allow-Methods"] == "POST, OPTIONS"
    assert r.headers["Access-Control-Allow-Headers"] == "content-type" and int(r.headers["Access-Control-Max-Age"]) > 0
    r = requests.options(s.url + f"/v2/models/{NAME}", headers=preflight, timeout=10)
    assert r.status_code == 204 and r.headers["Access-Control-Allow-Methods"] == "GET, HEAD, OPTIONS"
    r = requests.options(s.url + "/v1/embeddings", headers={**preflight, "Origin": "http://elsewhere:1"}, timeout=10)
    assert r.status_code == 403 and "Access-Control-Allow-Origin" not in r.headers
    assert "origin http://elsewhere:1 may not call this server" in r.json()["error"]["message"]
    r = requests.post(s.url + "/v1/embeddings", data=b"{not json", headers={"Origin": page}, timeout=10)
    assert r.status_code == 400 and r.headers["Access-Control-Allow-Origin"] == page
    exposed = [h.strip() for h in r.headers["Access-Control-Expose-Headers"].split(",")]
    assert {"Retry-After", "Inference-Header-Content-Length", "X-Attention-Precision"} <= set(exposed), exposed
    r = requests.get(s.url + "/v1/models", headers={"Origin": "https://example.org"}, timeout=10)
    assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == "https://example.org"
    r = requests.get(s.url + "/v1/models", headers={"Origin": "http://elsewhere:1"}, timeout=10)
    assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers
    s.kill()
    s = serve("--cors-origin", "*")
    r = requests.options(s.url + "/v1/classify", headers=preflight, timeout=10)
    assert r.status_code == 204 and r.headers["Access-Control-Allow-Origin"] == "*" and "Vary" not in r.headers
    for bad in ("localhost:3000", "http://localhost:3000/page", "http://"):
        p = subprocess.run([VIT_BINARY, "serve", "-m", str(DEIT), "--cors-origin", bad], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 2 and f"--cors-origin '{bad}': not an origin" in p.stderr, (bad, p.stderr)


def test_kserve_version_paths(serve):
    """The one version each model's metadata lists, "1", has its paths: metadata, readiness and infer answer as the
    model's own; another version is a 404 naming it."""
    s = serve()
    base = f"{s.url}/v2/models/{NAME}"
    assert requests.get(base + "/versions/1", timeout=10).json() == requests.get(base, timeout=10).json()
    assert requests.get(base + "/versions/1/ready", timeout=10).json() == {"name": NAME, "ready": True}
    pixels = {"inputs": [{"name": "pixel_values", "datatype": "FP32", "shape": [1, 3, 224, 224], "data": [0.0] * 150528}]}
    r = requests.post(base + "/versions/1/infer", json=pixels, timeout=60)
    assert r.status_code == 200 and r.json()["model_name"] == NAME and r.json()["model_version"] == "1", r.text[:300]
    for path in ("/versions/2", "/versions/2/ready", "/versions/0/infer"):
        if path.endswith("infer"):
            r = requests.post(base + path, json=pixels, timeout=10)
        else:
            r = requests.get(base + path, timeout=10)
        assert r.status_code == 404 and "has no version" in r.json()["error"], (path, r.text)
