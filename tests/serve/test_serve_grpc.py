"""KServe v2 over gRPC (`vit serve --grpc-port`) through KServe's own Python client, tritonclient.grpc (from the
Python package index into .venv by scripts/setup.sh): the same answers as the HTTP side, bit for bit, for every
output, both inputs and typed contents; the same refusals, as gRPC status codes; and hostile clients: a message
past the size limit, wrong shapes and types, a stream cut mid-message, a thousand concurrent calls, calls
cancelled while their batch runs. Without --grpc-port the server listens on its HTTP port alone. CTest label
serve (the hostile cases also grpc_hostile)."""
import os
import re
import socket
import struct
import sys
import threading
import time

import numpy as np
import pytest
import requests

from conftest import NAME, metrics, photos, wait_for_metric

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from listening import listening  # noqa: E402

try:
    import grpc
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    from tritonclient.utils import InferenceServerException
except ImportError:
    grpcclient = None


@pytest.fixture
def clients(serve):
    """(server, tritonclient.grpc client, tritonclient.http client) for `vit serve --grpc-port 0 ARGS`."""
    if grpcclient is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but tritonclient[grpc] is not installed (scripts/setup.sh puts it into .venv)")
        pytest.skip("tritonclient[grpc] is not installed (scripts/setup.sh puts it into .venv)")
    made = []

    def start(*args, **kw):
        s = serve("--grpc-port", "0", *args, **kw)
        s.grpc_port = grpc_port(s)
        g = grpcclient.InferenceServerClient(url=f"127.0.0.1:{s.grpc_port}")
        h = httpclient.InferenceServerClient(url=f"127.0.0.1:{s.port}")
        made.extend([g, h])
        return s, g, h

    yield start
    for c in made:
        c.close()


def grpc_port(server):
    m = re.search(r"KServe gRPC at 127\.0\.0\.1:(\d+),", server.stderr())
    assert m, server.stderr()
    return int(m.group(1))


def stub(server):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    return channel, service_pb2_grpc.GRPCInferenceServiceStub(channel)


def image_input(module, files):
    inp = module.InferInput("image", [len(files)], "BYTES")
    data = np.array([f.read_bytes() if hasattr(f, "read_bytes") else f for f in files], dtype=np.object_)
    if module is httpclient:
        inp.set_data_from_numpy(data, binary_data=True)
    else:
        inp.set_data_from_numpy(data)
    return inp


OUTPUTS = ["probabilities", "logits", "top_indices", "top_probabilities", "embedding"]


def infer_both(g, h, inputs_for, outputs=OUTPUTS, **kw):
    """The same request through both clients: {output: (grpc array, http array)}."""
    gr = g.infer(NAME, inputs_for(grpcclient), outputs=[grpcclient.InferRequestedOutput(o) for o in outputs], **kw)
    hr = h.infer(NAME, inputs_for(httpclient), outputs=[httpclient.InferRequestedOutput(o, binary_data=True)
                                                         for o in outputs], **kw)
    return {o: (gr.as_numpy(o), hr.as_numpy(o)) for o in outputs}, gr, hr


def test_grpc_equals_http(clients):
    """Health, metadata, repository index and infer through tritonclient.grpc equal tritonclient.http's, tensor
    for tensor and bit for bit: encoded images with top-k, pixel_values, and the request id."""
    s, g, h = clients()
    assert g.is_server_live() and g.is_server_ready() and g.is_model_ready(NAME)
    meta = g.get_server_metadata(as_json=True)
    assert meta["name"] == "vit" and meta["version"] == h.get_server_metadata()["version"]
    gm, hm = g.get_model_metadata(NAME, as_json=True), h.get_model_metadata(NAME)
    for side in ("inputs", "outputs"):
        assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in gm[side]] == \
               [(t["name"], t["datatype"], t["shape"]) for t in hm[side]]
    assert [(m["name"], m["state"]) for m in g.get_model_repository_index(as_json=True)["models"]] == \
           [(m["name"], m["state"]) for m in h.get_model_repository_index()]
    files = photos()[:4]
    got, gr, _ = infer_both(g, h, lambda mod: [image_input(mod, files)], parameters={"topk": 3}, request_id="req-7")
    assert gr.get_response().id == "req-7" and gr.get_response().model_name == NAME
    for name, (a, b) in got.items():
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name
    assert got["top_indices"][0].shape == (4, 3)
    # pixel_values [2, 3, 224, 224] FP32: the same logits and embeddings through both.
    rng = np.random.default_rng(0)
    pixels = rng.standard_normal((2, 3, 224, 224)).astype(np.float32)

    def pixel_input(mod):
        inp = mod.InferInput("pixel_values", list(pixels.shape), "FP32")
        inp.set_data_from_numpy(pixels, **({"binary_data": True} if mod is httpclient else {}))
        return [inp]

    got, _, _ = infer_both(g, h, pixel_input, outputs=["logits", "embedding"])
    for name, (a, b) in got.items():
        assert a.shape == b.shape and a.tobytes() == b.tobytes(), name


def test_grpc_typed_contents(clients):
    """Typed contents (bytes_contents, fp32_contents) instead of raw_input_contents give the same bytes; the
    default outputs (probabilities, and the top-k pair with parameters.topk) as HTTP gives them."""
    s, g, h = clients()
    channel, st = stub(s)
    files = photos()[4:6]
    req = service_pb2.ModelInferRequest(model_name=NAME)
    inp = req.inputs.add(name="image", datatype="BYTES", shape=[2])
    inp.contents.bytes_contents.extend(f.read_bytes() for f in files)
    req.parameters["topk"].int64_param = 2
    res = st.ModelInfer(req, timeout=60)
    assert [o.name for o in res.outputs] == ["probabilities", "top_indices", "top_probabilities"]
    want = h.infer(NAME, [image_input(httpclient, files)], parameters={"topk": 2},
                   outputs=[httpclient.InferRequestedOutput(o, binary_data=True) for o in
                            ("probabilities", "top_indices", "top_probabilities")])
    for o, raw in zip(res.outputs, res.raw_output_contents):
        assert raw == want.as_numpy(o.name).tobytes(), o.name
    pixels = np.linspace(-2, 2, 3 * 224 * 224, dtype=np.float32)
    req = service_pb2.ModelInferRequest(model_name=NAME)
    inp = req.inputs.add(name="pixel_values", datatype="FP32", shape=[1, 3, 224, 224])
    inp.contents.fp32_contents.extend(pixels.tolist())
    req.outputs.add(name="logits")
    typed = st.ModelInfer(req, timeout=60).raw_output_contents[0]
    hin = httpclient.InferInput("pixel_values", [1, 3, 224, 224], "FP32")
    hin.set_data_from_numpy(pixels.reshape(1, 3, 224, 224), binary_data=True)
    assert typed == h.infer(NAME, [hin], outputs=[httpclient.InferRequestedOutput("logits", binary_data=True)]
                            ).as_numpy("logits").tobytes()
    channel.close()


def status_of(call):
    with pytest.raises(InferenceServerException) as e:
        call()
    return e.value.status(), e.value.message()


def test_grpc_refusals(clients):
    """Each refusal the HTTP side answers with a 4xx is the matching gRPC status with the same message; the
    server answers the next call as before."""
    s, g, h = clients()
    good = photos()[0]
    code, msg = status_of(lambda: g.infer("nope", [image_input(grpcclient, [good])]))
    assert code == "StatusCode.NOT_FOUND" and f"'{NAME}'" in msg
    code, msg = status_of(lambda: g.is_model_ready(NAME, model_version="2"))
    assert code == "StatusCode.NOT_FOUND" and "version 1 only" in msg
    code, msg = status_of(lambda: g.infer(NAME, [image_input(grpcclient, [b"not an image"])]))
    assert code == "StatusCode.INVALID_ARGUMENT" and "input 'image' element 0" in msg
    bad_shape = grpcclient.InferInput("pixel_values", [1, 3, 32, 32], "FP32")
    bad_shape.set_data_from_numpy(np.zeros((1, 3, 32, 32), np.float32))
    code, msg = status_of(lambda: g.infer(NAME, [bad_shape]))
    hin = httpclient.InferInput("pixel_values", [1, 3, 32, 32], "FP32")
    hin.set_data_from_numpy(np.zeros((1, 3, 32, 32), np.float32), binary_data=True)
    assert code == "StatusCode.INVALID_ARGUMENT" and msg == status_of(lambda: h.infer(NAME, [hin]))[1]
    assert "expected [B, 3, 224, 224]" in msg
    wrong_type = grpcclient.InferInput("image", [1], "INT64")
    wrong_type.set_data_from_numpy(np.array([7], np.int64))
    code, msg = status_of(lambda: g.infer(NAME, [wrong_type]))
    assert code == "StatusCode.INVALID_ARGUMENT" and "datatype 'INT64', expected BYTES" in msg
    code, msg = status_of(lambda: g.infer(NAME, [image_input(grpcclient, [good])], parameters={"topk": 0}))
    assert "parameters.topk: 0 is not a number from 1 to 1000" in msg
    code, msg = status_of(lambda: g.infer(NAME, [image_input(grpcclient, [good])],
                                          outputs=[grpcclient.InferRequestedOutput("boxes")]))
    assert "unknown output 'boxes'" in msg
    code, msg = status_of(lambda: g.load_model(NAME))
    assert code == "StatusCode.INVALID_ARGUMENT" and "models are fixed at start" in msg
    channel, st = stub(s)
    req = service_pb2.ModelInferRequest(model_name=NAME)
    inp = req.inputs.add(name="image", datatype="BYTES", shape=[1])
    inp.contents.fp32_contents.append(1.0)
    with pytest.raises(grpc.RpcError) as e:
        st.ModelInfer(req, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "not fp32_contents" in e.value.details()
    req.ClearField("inputs")
    req.inputs.add(name="image", datatype="BYTES", shape=[1])
    req.raw_input_contents.extend([b"a", b"b"])
    with pytest.raises(grpc.RpcError) as e:
        st.ModelInfer(req, timeout=30)
    assert "raw_input_contents holds 2 tensors for 1 inputs" in e.value.details()
    channel.close()
    assert g.infer(NAME, [image_input(grpcclient, [good])]).as_numpy("probabilities").shape == (1, 1000)
    codes = {dict(k[1]).get("code") for k in metrics(s.url) if k[0] == "vit_grpc_requests_total"}
    assert {"OK", "NOT_FOUND", "INVALID_ARGUMENT"} <= codes


def test_http_alone_without_grpc_port(serve):
    """Without --grpc-port nothing but the HTTP port listens, and the start-up line names no gRPC."""
    s = serve()
    assert "gRPC" not in s.stderr()
    assert listening([s.proc.pid]) == {("127.0.0.1", s.port)}
    assert requests.get(s.url + "/v2/health/ready", timeout=10).status_code == 200


# ---- hostile clients


def http2_frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal_header(name, value):
    """An HPACK literal header field without indexing, new name, no Huffman coding (RFC 7541 6.2.2)."""
    return bytes([0, len(name)]) + name + bytes([len(value)]) + value


def cut_stream(port, cut):
    """An HTTP/2 client sending ModelInfer by hand and hanging up mid-message: cut 'frame' stops inside a DATA
    frame's header, 'message' after 1000 of a gRPC message's announced 100000 bytes, 'garbage' sends no HTTP/2
    at all."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if cut == "garbage":
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(range(256)) * 8)
    else:
        headers = b"".join(literal_header(k, v) for k, v in (
            (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/inference.GRPCInferenceService/ModelInfer"),
            (b":authority", b"127.0.0.1"), (b"content-type", b"application/grpc"), (b"te", b"trailers")))
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + http2_frame(4, 0, 0, b"") + http2_frame(1, 4, 1, headers))
        message = b"\x00" + struct.pack(">I", 100000) + b"\x0a" * 1000
        data = http2_frame(0, 0, 1, message)
        sock.sendall(data[:5] if cut == "frame" else data)
    time.sleep(0.2)
    sock.close()


@pytest.mark.parametrize("cut", ["frame", "message", "garbage"])
def test_grpc_stream_cut_mid_message(clients, cut):
    """A connection that ends inside a frame or a message, or speaks no HTTP/2, costs the server nothing: it
    answers the next call, and no body bytes stay held."""
    s, g, _ = clients()
    for _ in range(3):
        cut_stream(s.grpc_port, cut)
    assert g.infer(NAME, [image_input(grpcclient, photos()[:1])]).as_numpy("probabilities").shape == (1, 1000)
    assert metrics(s.url)[("vit_body_bytes_held", ())] == 0


def test_grpc_message_past_size_limit(clients):
    """A message over --max-body-mb is RESOURCE_EXHAUSTED from gRPC itself, before any of it is parsed."""
    s, g, _ = clients("--max-body-mb", "1")
    big = grpcclient.InferInput("image", [1], "BYTES")
    big.set_data_from_numpy(np.array([b"\xff\xd8" + b"\0" * (2 << 20)], dtype=np.object_))
    code, msg = status_of(lambda: g.infer(NAME, [big]))
    assert code == "StatusCode.RESOURCE_EXHAUSTED" and "larger than max" in msg
    assert g.infer(NAME, [image_input(grpcclient, photos()[:1])]).as_numpy("probabilities").shape == (1, 1000)


def test_grpc_thousand_concurrent_calls(clients):
    """1000 calls at once on one channel: each is answered, with the photo's class or UNAVAILABLE (the queue or
    pixel budget full: try again), never lost; the answered ones equal the same photo's HTTP answer; the metrics
    count every call, and the queue is empty after."""
    s, g, h = clients("--max-queue", "256")
    files = photos()[:8]
    want = {f.name: h.infer(NAME, [image_input(httpclient, [f])]).as_numpy("probabilities").argmax() for f in files}
    done, lock, finished = [], threading.Lock(), threading.Event()

    def callback(f):
        def cb(result, error):
            with lock:
                done.append((f, result, error))
                if len(done) == 1000:
                    finished.set()
        return cb

    for i in range(1000):
        f = files[i % len(files)]
        g.async_infer(NAME, [image_input(grpcclient, [f])], callback(f), client_timeout=300)
    assert finished.wait(300), f"{len(done)} of 1000 calls answered"
    ok = [(f, r) for f, r, e in done if e is None]
    refused = [e for _, _, e in done if e is not None]
    assert all(e.status() == "StatusCode.UNAVAILABLE" and "try again" in e.message() for e in refused), refused[:3]
    assert len(ok) >= 256 and all(r.as_numpy("probabilities").argmax() == want[f.name] for f, r in ok)
    m = metrics(s.url)
    counted = {dict(k[1])["code"]: v for k, v in m.items() if k[0] == "vit_grpc_requests_total" and
               dict(k[1]).get("method") == "ModelInfer"}
    assert counted.get("OK", 0) == len(ok) and counted.get("UNAVAILABLE", 0) == len(refused)
    assert m[("vit_queue_depth", (("model", NAME),))] == 0
    print(f"\n1000 concurrent gRPC calls: {len(ok)} answered, {len(refused)} UNAVAILABLE (queue of 256 images)")


def test_grpc_calls_cancelled_mid_batch(clients):
    """Calls whose client gives up (a 1 ms deadline) while their images wait or run: the server finishes them
    unseen, gives their budgets back, and answers the next calls."""
    s, g, _ = clients()
    channel, st = stub(s)
    req = service_pb2.ModelInferRequest(model_name=NAME)
    req.inputs.add(name="image", datatype="BYTES", shape=[4]).contents.bytes_contents.extend(
        f.read_bytes() for f in photos()[:4])
    for _ in range(20):
        with pytest.raises(grpc.RpcError) as e:
            st.ModelInfer(req, timeout=0.001)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    channel.close()
    assert g.infer(NAME, [image_input(grpcclient, photos()[:2])]).as_numpy("probabilities").shape == (2, 1000)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = metrics(s.url)
        if m[("vit_body_bytes_held", ())] == 0 and m[("vit_queued_pixels", ())] == 0:
            break
        time.sleep(0.05)
    assert m[("vit_body_bytes_held", ())] == 0 and m[("vit_queued_pixels", ())] == 0


def test_grpc_sigterm_drains(clients):
    """SIGTERM with calls under way: they are answered, then the server exits 0. A long --max-delay-ms keeps all
    eight queued when the signal comes (else a call the client has not yet sent, under load, is refused)."""
    s, g, _ = clients("--max-delay-ms", "3000", "--max-batch", "64")
    results = []
    for _ in range(8):
        g.async_infer(NAME, [image_input(grpcclient, photos()[:4])], lambda result, error: results.append(error), client_timeout=60)
    wait_for_metric(s.url, ("vit_queue_depth", (("model", NAME),)), lambda v: v >= 32, "the calls never queued", 30)
    s.signal()
    assert s.wait(60) == 0
    deadline = time.monotonic() + 10
    while len(results) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(results) == 8 and all(e is None for e in results), results


def test_grpc_port_taken(clients):
    """A --grpc-port already in use stops start-up with status 2 naming the address, as a busy --port does."""
    import subprocess
    from conftest import DEIT, VIT_BINARY
    s, _, _ = clients()
    r = subprocess.run([VIT_BINARY, "serve", "-m", str(DEIT), "--port", "0", "--grpc-port", str(s.grpc_port)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and f"cannot listen on 127.0.0.1:{s.grpc_port} for gRPC (--grpc-port)" in r.stderr, r.stderr
