"""`vit serve` on CLIP, EVA-02 CLIP, SigLIP and SigLIP 2 models with both towers, OpenCLIP's and Hugging Face's
(tests/make_text_models.py's shrunk random-weight models):
POST /v1/embeddings through OpenAI's own client with texts and images in one request, each answer equal to the
CLI's (`vit embed --text` for a text, `vit embed --head` for an image, as JSON lines; normalised or not as asked),
in input order; Infinity's `modality` field; a text longer than the tower's context cut as the reference cuts it
and marked "truncated"; every bad text (empty, a NUL, invalid UTF-8 raw or as a lone surrogate escape, too many)
a 400 in OpenAI's error form naming the input; a model served with its pre-logits refusing texts with the reason
(CTest serve_text, label serve)."""
import json
import re
import subprocess

import numpy as np
import pytest
import requests

from conftest import VIT_BINARY, cli_embed, data_uri, metrics, photos, require_module, text_models

EMBEDDINGS = "/v1/embeddings"
TEXTS = ["a dog on a beach", "a photo of a Siamese cat", "Café in Zürich, 東京タワー 🐶", "an AIRLINER!!!"]
# The CLI prints 17 significant digits of each f32 (round trip): its numbers are the server's bit for bit.
TOL = 1e-7


def client(s):
    openai = require_module("openai", "scripts/setup.sh puts it into .venv from tests/requirements.txt")
    return openai.OpenAI(base_url=f"{s.url}/v1", api_key="unused", max_retries=0, timeout=300)


def cli_text(model, texts, *args):
    """`vit embed --text` on each text as JSON lines: [(embedding, tokens, truncated)] in order."""
    cmd = [VIT_BINARY, "embed", "-m", str(model), *args]
    for t in texts:
        cmd += ["--text", t]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    rows = [json.loads(l) for l in out.splitlines()]
    return [(r["embedding"], r["tokens"], r.get("truncated", False)) for r in rows]


def max_delta(got, want):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert got.shape == want.shape
    return float(np.max(np.abs(got - want)))


def openai_error(r, status, text, param="input"):
    assert r.status_code == status, r.text
    e = r.json()["error"]
    assert text in e["message"] and e["param"] == param and e["type"] == "invalid_request_error", e
    return e["message"]


# The image side's embedding: CLIP's projection (`vit embed --head`), SigLIP's pooled features (it has no head).
@pytest.mark.parametrize("kind,head", [("oc_clip", ["--head"]), ("oc_siglip", []), ("hf_clip", ["--head"]),
                                       ("hf_siglip", []), ("oc_siglip2", []), ("oc_eva02", ["--head"])])
def test_openai_client_texts_and_images_in_one_request_equal_the_cli(serve, kind, head):
    model = text_models() / kind
    s = serve(model=model)
    c = client(s)
    files = photos()[:3]
    texts = cli_text(model, TEXTS, "--normalize")
    images = cli_embed(model, files, *head, "--normalize")
    # Texts and images interleaved, answered in input order.
    inputs = [TEXTS[0], data_uri(files[0]), TEXTS[1], data_uri(files[1]), TEXTS[2], data_uri(files[2]), TEXTS[3]]
    want = [texts[0][0], images[files[0].name], texts[1][0], images[files[1].name], texts[2][0], images[files[2].name],
            texts[3][0]]
    worst = 0.0
    for fmt in ({}, {"encoding_format": "float"}):  # the client asks for base64 and decodes it, unless told
        r = c.embeddings.create(model=model.name, input=inputs, **fmt)
        assert r.model == model.name and [d.index for d in r.data] == list(range(len(inputs)))
        for d, w in zip(r.data, want):
            worst = max(worst, max_delta(d.embedding, w))
            assert abs(np.linalg.norm(d.embedding) - 1) < 1e-5
    assert worst <= TOL, worst
    # The usage counts the texts' tokens beside the images'.
    image_tokens = r.usage.prompt_tokens - sum(t[1] for t in texts)
    assert image_tokens > 0 and image_tokens % 3 == 0
    # One string is a text; unnormalised as `vit embed --text` without --normalize.
    raw = cli_text(model, TEXTS[:1])
    r = c.embeddings.create(model=model.name, input=TEXTS[0], extra_body={"normalize": False})
    assert max_delta(r.data[0].embedding, raw[0][0]) <= TOL and abs(np.linalg.norm(r.data[0].embedding) - 1) > 1e-3
    # Infinity's modality decides: "text" takes a data URI as words, "image" a text as an image (and refuses it).
    r = c.embeddings.create(model=model.name, input=[TEXTS[1]], extra_body={"modality": "text"})
    assert max_delta(r.data[0].embedding, texts[1][0]) <= TOL
    r = requests.post(s.url + EMBEDDINGS, json={"model": model.name, "input": [TEXTS[0]], "modality": "image"},
                      timeout=60)
    openai_error(r, 400, "input[0]: ")
    print(f"{kind}: max |delta| to the CLI {worst:.3g} over {len(inputs)} inputs in both encodings")


def test_bad_texts_are_refused_naming_the_input(serve):
    model = text_models() / "oc_clip"
    s = serve("--max-inputs", "8", model=model)
    url = s.url + EMBEDDINGS

    def post(inputs, **extra):
        return requests.post(url, json={"model": model.name, "input": inputs, **extra}, timeout=60)

    openai_error(post(["a dog", ""]), 400, "input[1] (text): empty")
    openai_error(post(["a\0dog"]), 400, "input[0] (text): holds a NUL byte")
    openai_error(post(["a"] * 9), 400, "more than 8 inputs in one request (--max-inputs)", None)
    openai_error(post(["a dog"], modality="video"), 400, "'modality': \"video\"", "modality")
    # Invalid UTF-8 cannot be a JSON string: raw bytes and a lone surrogate escape are refused, naming the input.
    body = b'{"model": "oc_clip", "input": ["a dog", "caf\xe9"]}'
    r = requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=60)
    msg = openai_error(r, 400, "'input'[1]: a string that is not UTF-8", None)
    body = b'{"model": "oc_clip", "input": ["a dog", "cat", "\\udc80 x"]}'
    r = requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=60)
    msg = openai_error(r, 400, "'input'[2]: a string holding a lone surrogate escape (\\udcXX), which is no character",
                       None)
    assert "surrogate U+DC00..U+DFFF" in msg, msg  # the parser's own words after it
    # 100,000 characters: cut to the context as open_clip's tokenizer cuts it, marked, and equal to the CLI's.
    long = "a dog on a beach " * 5883
    assert len(long) > 100_000
    r = post([long, "a cat"], encoding_format="float")
    assert r.status_code == 200, r.text
    d = r.json()["data"]
    assert d[0]["truncated"] is True and "truncated" not in d[1]
    want = cli_text(model, [long], "--normalize")[0]
    assert want[2] and max_delta(d[0]["embedding"], want[0]) <= TOL
    r = client(s).embeddings.create(model=model.name, input=[long])
    assert r.data[0].truncated is True  # the client keeps the field
    # The server answers the next request; /metrics counts the texts answered and refused.
    assert post(["a dog"]).status_code == 200
    m = metrics(s.url)
    key = (("model", model.name),)
    assert m[("vit_texts_embedded_total", key)] == 5 and m[("vit_texts_failed_total", key)] == 2, m


def test_a_model_served_with_its_pre_logits_refuses_texts_saying_why(serve):
    model = text_models() / "oc_clip"
    s = serve("--embedding", "pre-logits", model=model)
    r = requests.post(s.url + EMBEDDINGS, json={"input": ["a dog"]}, timeout=60)
    openai_error(r, 400, "--embedding pre-logits")
    r = requests.post(s.url + EMBEDDINGS, json={"input": ["a dog"], "modality": "text"}, timeout=60)
    openai_error(r, 400, "--embedding pre-logits", "modality")
    r = requests.post(s.url + EMBEDDINGS, json={"input": [data_uri(photos()[0])]}, timeout=60)
    assert r.status_code == 200


def test_kserve_text_input_through_tritonclient(serve):
    """KServe v2's `text` BYTES input [B] gives `embedding` [B, E], each row `vit embed --text`'s; texts in binary and
    JSON form, and over gRPC; a bad element is a 400 naming it."""
    httpclient = require_module("tritonclient.http", "scripts/setup.sh puts tritonclient into .venv")
    from tritonclient.utils import InferenceServerException
    model = text_models() / "oc_clip"
    s = serve("--grpc-port", "0", model=model)
    client = httpclient.InferenceServerClient(url=f"127.0.0.1:{s.port}")
    meta = client.get_model_metadata(model.name)
    assert {"name": "text", "datatype": "BYTES", "shape": [-1]} in meta["inputs"]
    want = cli_text(model, TEXTS, "--normalize")
    raw = cli_text(model, TEXTS)
    worst = 0.0
    for binary in (True, False):
        inp = httpclient.InferInput("text", [len(TEXTS)], "BYTES")
        inp.set_data_from_numpy(np.array([t.encode() for t in TEXTS], dtype=np.object_), binary_data=binary)
        out = [httpclient.InferRequestedOutput("embedding", binary_data=binary)]
        got = client.infer(model.name, [inp], outputs=out).as_numpy("embedding")
        assert got.shape == (len(TEXTS), len(want[0][0])) and got.dtype == np.float32
        worst = max(worst, max(max_delta(g, w[0]) for g, w in zip(got, want)))
        got = client.infer(model.name, [inp], outputs=out, parameters={"normalize": False}).as_numpy("embedding")
        worst = max(worst, max(max_delta(g, w[0]) for g, w in zip(got, raw)))
    grpcclient = require_module("tritonclient.grpc", "scripts/setup.sh puts tritonclient[grpc] into .venv")
    port = int(re.search(r"KServe gRPC at 127\.0\.0\.1:(\d+),", s.stderr()).group(1))
    g = grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}")
    try:
        inp = grpcclient.InferInput("text", [len(TEXTS)], "BYTES")
        inp.set_data_from_numpy(np.array([t.encode() for t in TEXTS], dtype=np.object_))
        got = g.infer(model.name, [inp], outputs=[grpcclient.InferRequestedOutput("embedding")]).as_numpy("embedding")
        worst = max(worst, max(max_delta(g_, w[0]) for g_, w in zip(got, want)))
    finally:
        g.close()
    assert worst <= TOL, worst
    # The default output of a text input is its embedding; a class output or top-k is refused.
    inp = httpclient.InferInput("text", [1], "BYTES")
    inp.set_data_from_numpy(np.array([b"a dog"], dtype=np.object_), binary_data=True)
    assert client.infer(model.name, [inp]).as_numpy("embedding").shape == (1, len(want[0][0]))
    with pytest.raises(InferenceServerException, match="gives embedding only"):
        client.infer(model.name, [inp], parameters={"topk": 3})
    bad = httpclient.InferInput("text", [3], "BYTES")
    bad.set_data_from_numpy(np.array([b"a dog", b"caf\xe9", b""], dtype=np.object_), binary_data=True)
    with pytest.raises(InferenceServerException, match=r"input 'text' element 1: not valid UTF-8"):
        client.infer(model.name, [bad])
    print(f"KServe text: max |delta| to the CLI {worst:.3g}")


def test_kserve_text_on_an_image_only_model_says_it_has_no_text_tower(serve):
    r = serve().url + "/v2/models/deit_tiny_patch16_224.fb_in1k/infer"
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a dog"]}]}
    r = requests.post(r, json=body, timeout=60)
    assert r.status_code == 400 and "has no text tower" in r.json()["error"], r.text


def cli_labels(model, files, labels, templates):
    out = subprocess.run([VIT_BINARY, "classify", "--json", "-k", str(len(labels)), "-m", str(model), "--labels-text",
                          ",".join(labels), "--templates", templates, *map(str, files)],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    return {json.loads(l)["file"].rsplit("/", 1)[-1]: json.loads(l)["top"] for l in out.splitlines()}


@pytest.mark.parametrize("kind", ["oc_clip", "oc_siglip"])
def test_classify_with_labels_of_the_request_equals_labels_text(serve, kind):
    """POST /v1/classify?labels=...&templates=...: each photo's classes and probabilities those of `vit classify
    --labels-text` with the same templates (softmax for CLIP, each class's sigmoid for SigLIP)."""
    model = text_models() / kind
    s = serve(model=model)
    files = photos()[:4]
    labels = ["tench", "Siamese cat", "airliner", "a dog + a ball"]
    worst = 0.0
    for templates in ("simple", "imagenet"):
        want = cli_labels(model, files, labels, templates)
        form = [("file", (f.name, f.read_bytes(), "image/jpeg")) for f in files]
        r = requests.post(s.url + "/v1/classify", params={"labels": ",".join(labels), "templates": templates,
                                                          "topk": len(labels)}, files=form, timeout=300)
        assert r.status_code == 200, r.text
        for got in r.json():
            w = want[got["file"]]
            assert [(t["index"], t["label"]) for t in got["top"]] == [(t["index"], t["label"]) for t in w]
            worst = max(worst, max(abs(a["prob"] - b["prob"]) for a, b in zip(got["top"], w)))
    assert worst <= 1e-6, worst
    # Without labels, a model without classes says it takes them per request.
    r = requests.post(s.url + "/v1/classify", data=files[0].read_bytes(), timeout=60)
    assert r.status_code == 400 and "takes labels per request: /v1/classify?labels=" in r.json()["error"], r.text
    # One image in the body, the default templates (imagenet) and top 5 cut to the 4 classes.
    r = requests.post(s.url + "/v1/classify", params={"labels": ",".join(labels)}, data=files[0].read_bytes(),
                      headers={"Content-Type": "image/jpeg"}, timeout=300)
    assert r.status_code == 200 and len(r.json()["top"]) == 4, r.text
    assert [t["label"] for t in r.json()["top"]] == [t["label"] for t in cli_labels(model, files[:1], labels, "imagenet")[files[0].name]]
    for params, text in [({"labels": "tench,,airliner"}, "class 2 is empty"),
                         ({"labels": "tench,tench"}, "'tench' is there twice"),
                         ({"labels": "tench", "templates": "fancy"}, "neither imagenet nor simple"),
                         ({"templates": "simple"}, "templates: the prompt templates of ?labels"),
                         ({"labels": "tench,cat", "topk": 3}, "topk: '3' is not a number from 1 to 2")]:
        r = requests.post(s.url + "/v1/classify", params=params, data=files[0].read_bytes(), timeout=60)
        assert r.status_code == 400 and text in r.json()["error"], (params, r.text)
    print(f"{kind}: zero-shot probabilities max |delta| to --labels-text {worst:.3g}")


def test_labels_on_an_image_only_model_say_it_has_no_text_tower(serve):
    s = serve()
    r = requests.post(s.url + "/v1/classify", params={"labels": "tench,goldfish"}, data=photos()[0].read_bytes(),
                      timeout=60)
    assert r.status_code == 400 and "zero-shot labels need a text tower" in r.json()["error"], r.text
    assert "has no text tower" in r.json()["error"]


def test_text_tower_runs_at_the_served_precision(serve):
    """--precision int8: the texts' embeddings are `vit embed --text --precision int8`'s, not f32's."""
    model = text_models() / "oc_clip_b32_shape"
    s = serve("--precision", "int8", model=model)
    want = cli_text(model, TEXTS, "--normalize", "--precision", "int8")
    f32 = cli_text(model, TEXTS, "--normalize")
    r = client(s).embeddings.create(model=model.name, input=TEXTS)
    worst = max(max_delta(d.embedding, w[0]) for d, w in zip(r.data, want))
    assert worst <= TOL, worst
    assert max(max_delta(d.embedding, w[0]) for d, w in zip(r.data, f32)) > 1e-5  # int8 indeed
    print(f"int8 text tower: max |delta| to the CLI's int8 {worst:.3g}")
