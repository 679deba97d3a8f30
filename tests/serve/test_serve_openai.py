"""`vit serve`'s POST /v1/embeddings through OpenAI's own Python client, `openai` (from the Python package index
into .venv by scripts/setup.sh; made with max_retries=0, so a 503 is seen, not retried): the sample photos'
embeddings equal `vit embed --normalize` (within 1e-6 at f32, bit for bit at int8 whatever shares a batch) in
both encodings, unnormalised through extra_body; every error with its status in OpenAI's error form, the HTTP
layer's 405/413/415/503 included; hostile clients (a 30 MB string, 100 000 inputs, deep nesting, invalid UTF-8,
a decompression bomb) each a 400 with the server answering the next request (CTest label serve)."""
import base64
import json
import random
import socket
import subprocess
import threading
import time

import numpy as np
import pytest
import requests

from conftest import DEIT, NAME, cli_embed, data_uri, metrics, photos, png_bomb, require_module, wait_for_metric

EMBEDDINGS = "/v1/embeddings"


def client(s):
    openai = require_module("openai", "scripts/setup.sh puts it into .venv from tests/requirements.txt")
    return openai.OpenAI(base_url=f"{s.url}/v1", api_key="unused", max_retries=0, timeout=300)


def close_to(got, want, tol):
    return len(got) == len(want) and float(np.max(np.abs(np.asarray(got, np.float32) - np.asarray(want, np.float32)))) <= tol


def test_openai_client_both_encodings_equal_vit_embed(serve):
    s = serve()
    c = client(s)
    files = photos()[:6]
    want = cli_embed(DEIT, files, "--normalize")
    inputs = [data_uri(f) for f in files]
    r = c.embeddings.create(model=NAME, input=inputs)  # the client asks for base64 and decodes it itself
    assert r.model == NAME and [d.index for d in r.data] == list(range(6))
    assert r.usage.prompt_tokens == r.usage.total_tokens == 6 * 197  # the image tokens DeiT-Tiny ran
    for d, f in zip(r.data, files):
        assert close_to(d.embedding, want[f.name], 1e-6), f.name
        assert abs(np.linalg.norm(d.embedding) - 1) < 1e-5
    r = c.embeddings.create(model=NAME, input=inputs, encoding_format="float")
    for d, f in zip(r.data, files):
        assert close_to(d.embedding, want[f.name], 1e-6), f.name
    # One string, bare base64, Infinity's modality field; unnormalised as `vit embed` without --normalize.
    r = c.embeddings.create(model=NAME, input=base64.b64encode(files[0].read_bytes()).decode(),
                            extra_body={"modality": "image"})
    assert len(r.data) == 1 and close_to(r.data[0].embedding, want[files[0].name], 1e-6)
    raw = cli_embed(DEIT, files[:2])
    r = c.embeddings.create(model=NAME, input=inputs[:2], extra_body={"normalize": False}, dimensions=192)
    for d, f in zip(r.data, files[:2]):
        assert close_to(d.embedding, raw[f.name], 1e-6) and abs(np.linalg.norm(d.embedding) - 1) > 1e-3
    # base64 on the wire is the little-endian f32 bytes; the user field is ignored.
    r = requests.post(s.url + EMBEDDINGS, json={"model": NAME, "input": inputs[:1], "encoding_format": "base64",
                                                "user": "someone"}, timeout=60)
    assert r.status_code == 200 and r.json()["object"] == "list" and r.json()["data"][0]["object"] == "embedding"
    assert close_to(np.frombuffer(base64.b64decode(r.json()["data"][0]["embedding"]), "<f4"), want[files[0].name], 1e-6)
    # The model is optional with one model served.
    r = requests.post(s.url + EMBEDDINGS, json={"input": inputs[:1], "encoding_format": "float"}, timeout=60)
    assert r.status_code == 200 and close_to(r.json()["data"][0]["embedding"], want[files[0].name], 1e-6)
    assert [m.id for m in c.models.list()] == [NAME]


def test_int8_bit_identical_to_vit_embed_whatever_shares_a_batch(serve):
    s = serve("--precision", "int8", "--max-delay-ms", "20")
    c = client(s)
    files = photos()[:24]
    want = cli_embed(DEIT, files, "--normalize", "--precision", "int8")
    got, lock = {}, threading.Lock()

    def worker(seed):
        rng = random.Random(seed)
        share = rng.sample(files, 6)
        for k in range(0, 6, rng.choice([1, 2, 3])):
            part = share[k:k + 3]
            r = c.embeddings.create(model=NAME, input=[data_uri(f) for f in part])
            with lock:
                for d, f in zip(r.data, part):
                    got.setdefault(f.name, []).append(d.embedding)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert got
    for name, vectors in got.items():
        for v in vectors:
            assert np.array_equal(np.asarray(v, np.float32), np.asarray(want[name], np.float32)), name


class Raw:
    """An answer read off a socket: status_code, headers, json()."""

    def __init__(self, data):
        assert data, "the server closed the connection without an answer"
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status_code = int(lines[0].split()[1])
        self.headers = dict(l.split(": ", 1) for l in lines[1:])
        self.text = body.decode()

    def json(self):
        return json.loads(self.text)


def raw_post(port, path, head_only_length=None, body=b""):
    """POSTs on a fresh connection, the whole body or only a header promising head_only_length bytes, and
    reads the answer the server sends before it closes."""
    length = head_only_length if head_only_length is not None else len(body)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
        c.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n" % (path.encode(), length) + body)
        got = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                return Raw(got)
            got += chunk


def openai_error(r, status, fragment, param=None):
    """The answer is OpenAI's error form with this status, its message naming the problem."""
    assert r.status_code == status, (fragment, r.status_code, r.text[:300])
    e = r.json()["error"]
    assert set(e) == {"message", "type", "param", "code"}, e
    assert fragment in e["message"], (fragment, e)
    assert e["type"] == ("server_error" if status >= 500 else "invalid_request_error")
    if param is not None:
        assert e["param"] == param, e


def test_embeddings_errors_in_openai_form(serve):
    s = serve("--max-inputs", "4", "--max-body-mb", "1", "--max-bodies-mb", "2", "--timeout-s", "20")
    good = data_uri(photos()[0])
    not_image = base64.b64encode(b"not an image at all").decode()
    cases = [
        ({"model": "resnet50", "input": [good]}, 404, "no model named 'resnet50'; this server has", "model"),
        ({"model": NAME, "input": ["https://example.com/cat.jpg"]}, 400, "input[0]: URLs are not fetched", "input"),
        ({"model": NAME, "input": [good, "data:image/jpeg;base64,@@@@"]}, 400, "input[1]: not base64", "input"),
        ({"model": NAME, "input": [good, not_image]}, 400, "input[1]: not a supported image", "input"),
        ({"model": NAME, "input": ["data:text/plain;base64,aGVsbG8="]}, 400, "data URI of text/plain is not an image", "input"),
        ({"model": NAME, "input": "data:image/png,rawbytes"}, 400, "must carry base64", "input"),
        ({"model": NAME, "input": [[101, 2023, 102]]}, 400, "token arrays", "input"),
        ({"model": NAME, "input": [101, 2023, 102]}, 400, "token arrays", "input"),
        ({"model": NAME, "input": [good], "dimensions": 64}, 400, "'dimensions': 64; model", "dimensions"),
        ({"model": NAME, "input": [good], "encoding_format": "hex"}, 400, "'encoding_format'", "encoding_format"),
        ({"model": NAME, "input": [good], "modality": "text"}, 400, "embeds images", "modality"),
        ({"model": NAME, "input": [good], "normalize": "yes"}, 400, "'normalize'", "normalize"),
        ({"model": NAME, "input": []}, 400, "'input' holds no inputs", "input"),
        ({"model": NAME, "input": {"image": good}}, 400, "'input' is object", "input"),
        ({"model": NAME}, 400, "'input' is missing", "input"),
        ({"model": NAME, "input": [good] * 5}, 400, "more than 4 inputs in one request (--max-inputs)", None),
    ]
    for body, status, fragment, param in cases:
        openai_error(requests.post(s.url + EMBEDDINGS, json=body, timeout=60), status, fragment, param)
        assert requests.post(s.url + EMBEDDINGS, json={"model": NAME, "input": [good]}, timeout=60).status_code == 200
    # The HTTP layer's own errors on this route take OpenAI's form too.
    openai_error(requests.post(s.url + EMBEDDINGS, data=b"{not json", timeout=30), 400, "malformed JSON")
    openai_error(requests.post(s.url + EMBEDDINGS, data=b"{}", headers={"Content-Type": "text/plain"}, timeout=30),
                 415, "Content-Type text/plain")
    openai_error(requests.get(s.url + EMBEDDINGS, timeout=30), 405, "GET is not allowed")
    openai_error(raw_post(s.port, EMBEDDINGS, head_only_length=2_000_000), 413, "--max-body-mb")
    held, n = [], 943718
    for _ in range(2):  # two bodies of 0.9 MiB still coming hold the 2 MiB budget
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n{" % n)
        held.append(c)
    wait_for_metric(s.url, ("vit_body_bytes_held", ()), lambda v: v >= 2 * n, "the two bodies were never held", 30)
    r = raw_post(s.port, EMBEDDINGS, head_only_length=300_000)  # 0.3 MiB more than the budget has left
    openai_error(r, 503, "--max-bodies-mb")
    assert r.headers["Retry-After"] == "1"
    for c in held:
        c.close()
    wait_for_metric(s.url, ("vit_body_bytes_held", ()), lambda v: v <= 0,
                    "the closed requests' bodies were never given back", 30)
    openai = require_module("openai", "scripts/setup.sh")
    with pytest.raises(openai.NotFoundError):
        client(s).embeddings.create(model="resnet50", input=[good])
    with pytest.raises(openai.BadRequestError, match="URLs are not fetched"):
        client(s).embeddings.create(model=NAME, input=["https://example.com/cat.jpg"])
    assert len(client(s).embeddings.create(model=NAME, input=[good]).data) == 1


def test_official_client_sees_a_full_queue_as_503_unretried(serve):
    """With --max-delay-ms 3000 and fewer images than a batch waiting, the queue holds still: the next request
    does not fit, and the client (max_retries=0) raises the 503 at once."""
    openai = require_module("openai", "scripts/setup.sh puts it into .venv")
    s = serve("--max-batch", "8", "--max-queue", "8", "--max-delay-ms", "3000")
    c = client(s)
    image = data_uri(photos()[0])
    waiting = [threading.Thread(target=lambda: c.embeddings.create(model=NAME, input=[image] * 7))]
    waiting[0].start()
    deadline = time.monotonic() + 30
    while "vit_queue_depth{model=\"%s\"} 7" % NAME not in requests.get(s.url + "/metrics", timeout=10).text:
        assert time.monotonic() < deadline, "the request never queued"
        time.sleep(0.02)
    t0 = time.monotonic()
    with pytest.raises(openai.InternalServerError) as e:
        c.embeddings.create(model=NAME, input=[image] * 2)
    assert e.value.status_code == 503 and "queue is full" in str(e.value)
    assert time.monotonic() - t0 < 2
    waiting[0].join(60)


def test_hostile_clients_on_embeddings_get_a_400_and_the_server_goes_on(serve):
    s = serve()
    good = {"model": NAME, "input": [data_uri(photos()[1])], "encoding_format": "float"}
    bomb = "data:image/png;base64," + base64.b64encode(png_bomb(10000, rgba16=False)).decode()  # 100 MP, a few KB
    cases = [
        (json.dumps({"model": NAME, "input": base64.b64encode(random.Random(0).randbytes(22_500_000)).decode()}).encode(),
         "input[0]: not a supported image"),  # a 30 MB base64 string
        (json.dumps({"model": NAME, "input": ["x"] * 100_000}).encode(), "more than 256 inputs"),
        (b'{"model": "' + NAME.encode() + b'", "input": ' + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}",
         "nested deeper than 32 levels"),
        (b'{"model": "' + NAME.encode() + b'", "input": ["\xff\xfe\xfd"]}', "malformed JSON"),
        (json.dumps({"model": NAME, "input": [bomb]}).encode(), "10000x10000 = 100000000 pixels is over the limit"),
    ]
    for body, fragment in cases:
        r = requests.post(s.url + EMBEDDINGS, data=body, headers={"Content-Type": "application/json"}, timeout=300)
        openai_error(r, 400, fragment)
        r = requests.post(s.url + EMBEDDINGS, json=good, timeout=60)
        assert r.status_code == 200 and len(r.json()["data"][0]["embedding"]) == 192
    assert s.proc.poll() is None


def test_base64_as_rfc_2045_decoders_read_it(serve):
    """Line-wrapped base64 (what `base64` writes without -w0), whitespace around and inside, and the data URI's scheme
    and media type in any case are the image they encode; an upper-case URL is still a URL, not base64; a sentence
    sent to a model without a text tower is told the model embeds images."""
    s = serve()
    f = photos()[0]
    want = cli_embed(DEIT, [f], "--normalize")[f.name]
    plain = base64.b64encode(f.read_bytes()).decode()
    wrapped = subprocess.run(["base64"], input=f.read_bytes(), capture_output=True, check=True).stdout.decode()
    assert "\n" in wrapped.strip()
    crlf = "\r\n".join(plain[i:i + 64] for i in range(0, len(plain), 64))
    for text in (wrapped, "  " + plain + "\n", crlf, "DATA:IMAGE/JPEG;BASE64," + wrapped, "Data:image/jpeg;Base64, " + crlf):
        r = requests.post(s.url + EMBEDDINGS, json={"model": NAME, "input": [text], "encoding_format": "float"}, timeout=60)
        assert r.status_code == 200, (text[:40], r.text[:300])
        assert close_to(r.json()["data"][0]["embedding"], want, 1e-6), text[:40]
    cases = [
        ("HTTP://EXAMPLE.COM/cat.jpg", "input[0]: URLs are not fetched"),
        (" ftp://example.com/cat.jpg", "input[0]: URLs are not fetched"),
        ("a photo of a cat", "input[0]: text: model 'deit_tiny_patch16_224.fb_in1k' has no text tower: it embeds images, not text"),
        ("What is in this picture?", "embeds images, not text"),
        (plain[:100] + "!" + plain[100:], "embeds images, not text"),
        (plain + "===", "not base64"),
        ("data:image/jpeg;base64," + plain[:101], "not base64"),
    ]
    for text, fragment in cases:
        openai_error(requests.post(s.url + EMBEDDINGS, json={"model": NAME, "input": [text]}, timeout=60), 400, fragment,
                     "input")


def test_embeddings_past_max_connections_in_openai_form(serve):
    """Past --max-connections, /v1/embeddings answers 503 in OpenAI's error form, as every error on that route."""
    s = serve("--max-connections", "1")
    deadline = time.monotonic() + 20
    while True:  # hold the one connection, once the server counts it alone
        held = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        time.sleep(0.2)
        r = raw_post(s.port, EMBEDDINGS, body=json.dumps({"model": NAME, "input": [data_uri(photos()[0])]}).encode())
        if r.status_code == 503 or time.monotonic() > deadline:
            break
        held.close()
        time.sleep(0.2)
    openai_error(r, 503, "too many connections (1, --max-connections)")
    assert r.headers["Retry-After"] == "1"
    held.close()
