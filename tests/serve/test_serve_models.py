"""`vit serve` with models of every kind, several in one process (CTest label serve): a DINOv2 folder and an
OpenCLIP CLIP tower (the generated layout models) beside the real DeiT-Tiny, each answering correctly under 8
concurrent clients mixing the three and every endpoint; a headless model's KServe metadata and `embedding`
output; the model-repository extension; naming models (404 naming the served ones, ?model= with several);
per-model flags and the start-up errors that name a model; zero-shot labels from text embeddings over HTTP;
per-model metrics."""
import base64
import json
import random
import subprocess
import threading

import numpy as np
import pytest
import requests

from conftest import DEIT, NAME, VIT_BINARY, binary_infer, cli_embed, data_uri, layout_models, metrics, photos

CLIENTS = 8


def cli_top(model, files, *args):
    out = subprocess.run([VIT_BINARY, "classify", "--json", "-k", "5", "-m", str(model), *args, *map(str, files)],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    return {json.loads(l)["file"].rsplit("/", 1)[-1]: [(t["index"], t["label"], t["prob"]) for t in json.loads(l)["top"]]
            for l in out.splitlines()}


def infer_embedding(url, model, images, normalize=True, outputs=("embedding",)):
    """KServe infer on encoded images (binary tensor data) asking for the embedding, in JSON: [B, E]."""
    body, headers = binary_infer(images, list(outputs) if outputs else None,
                                 parameters=None if normalize else {"normalize": False})
    r = requests.post(f"{url}/v2/models/{model}/infer", data=body, headers=headers, timeout=120)
    assert r.status_code == 200, r.text[:300]
    out = r.json()["outputs"][0]
    assert out["name"] == "embedding" and out["datatype"] == "FP32"
    return np.asarray(out["data"], np.float32).reshape(out["shape"])


def test_three_models_side_by_side_under_8_clients(serve):
    """DeiT-Tiny classifies (as `vit classify`), DINOv2 embeds its pre-logits and the CLIP tower its projection
    (as `vit embed --normalize`, `--head` for the tower), all from one process, while 8 clients mix the three models
    and /v1/classify, /v1/embeddings and KServe infer at random."""
    models = layout_models()
    dino, clip = models / "hf_dinov2", models / "openclip"
    s = serve("-m", f"dino={dino}", "-m", f"clip={clip}", "-v")  # DeiT-Tiny is the fixture's first -m
    assert "model deit_tiny_patch16_224.fb_in1k " in s.stderr() and "model dino " in s.stderr()
    files = photos()[:24]
    classes = cli_top(DEIT, files)
    want = {"dino": cli_embed(dino, files, "--normalize"), "clip": cli_embed(clip, files, "--normalize", "--head")}
    assert len(want["dino"][files[0].name]) == 64 and len(want["clip"][files[0].name]) == 32
    index = requests.get(s.url + "/v1/models", timeout=10).json()
    assert [m["id"] for m in index["data"]] == [NAME, "dino", "clip"]
    assert [m["vit"]["classes"] for m in index["data"]] == [1000, 0, 0]
    checked, failures, lock = [], [], threading.Lock()

    def client(seed):
        rng = random.Random(seed)
        with requests.Session() as session:
            for _ in range(12):
                f = rng.choice(files)
                kind = rng.choice(["classify", "dino", "clip", "dino-kserve", "clip-kserve"])
                try:
                    if kind == "classify":
                        r = session.post(s.url + f"/v1/classify?model={NAME}&topk=5", data=f.read_bytes(), timeout=300)
                        got = [(t["index"], t["label"], t["prob"]) for t in r.json()["top"]]
                        ok = [g[:2] for g in got] == [w[:2] for w in classes[f.name]] and all(
                            abs(g[2] - w[2]) <= 1e-6 for g, w in zip(got, classes[f.name]))
                    elif kind.endswith("kserve"):
                        name = kind.split("-")[0]
                        got = infer_embedding(s.url, name, [f.read_bytes()])[0]
                        ok = np.max(np.abs(got - np.asarray(want[name][f.name], np.float32))) <= 1e-6
                    else:
                        r = session.post(s.url + "/v1/embeddings", json={"model": kind, "input": [data_uri(f)],
                                                                         "encoding_format": "base64"}, timeout=300)
                        got = np.frombuffer(base64.b64decode(r.json()["data"][0]["embedding"]), "<f4")
                        ok = np.max(np.abs(got - np.asarray(want[kind][f.name], np.float32))) <= 1e-6
                except Exception as e:  # noqa: BLE001 - reported below with the request that failed
                    ok = False
                    kind += f" ({e!r})"
                with lock:
                    checked.append(kind)
                    if not ok:
                        failures.append((kind, f.name))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert len(checked) == CLIENTS * 12 and not failures, failures
    m = metrics(s.url)
    for name in (NAME, "dino", "clip"):  # each model's own metrics
        assert m[("vit_batch_size_count", (("model", name),))] > 0
        assert m[("vit_queue_depth", (("model", name),))] == 0
    served = sum(m[("vit_images_classified_total", (("model", name),))] for name in (NAME, "dino", "clip"))
    assert served == len(checked)
    logged = [l for l in s.stderr_lines if "POST /v1/embeddings 200" in l]
    assert logged and all(l.rstrip().endswith((" model dino", " model clip")) for l in logged)


def test_headless_model_metadata_and_kserve_embedding(serve):
    """A headless model's metadata lists only `embedding` [-1, E]; infer with no outputs named answers it, for
    encoded images and for pixel_values, normalised unless parameters.normalize is false."""
    dino = layout_models() / "hf_dinov2"
    s = serve(model=dino)
    meta = requests.get(s.url + "/v2/models/hf_dinov2", timeout=10).json()
    assert meta["outputs"] == [{"name": "embedding", "datatype": "FP32", "shape": [-1, 64]}]
    files = photos()[:3]
    want = cli_embed(dino, files, "--normalize")
    raw = cli_embed(dino, files)
    got = infer_embedding(s.url, "hf_dinov2", [f.read_bytes() for f in files], outputs=None)  # no outputs named
    assert got.shape == (3, 64)
    for row, f in zip(got, files):
        assert np.max(np.abs(row - want[f.name])) <= 1e-6
    got = infer_embedding(s.url, "hf_dinov2", [f.read_bytes() for f in files], normalize=False)
    for row, f in zip(got, files):
        assert np.max(np.abs(row - raw[f.name])) <= 1e-6
    for bad, fragment in (({"outputs": [{"name": "probabilities"}]}, "unknown output 'probabilities'; this model gives embedding"),
                          ({"parameters": {"topk": 3}}, "has no classes"),
                          ({"parameters": {"normalize": 1}}, "parameters.normalize: 1")):
        r = requests.post(s.url + "/v2/models/hf_dinov2/infer", json={"inputs": [{
            "name": "image", "datatype": "BYTES", "shape": [1], "data": ["x"]}], **bad}, timeout=30)
        assert r.status_code == 400 and fragment in r.json()["error"], r.text
    r = requests.post(s.url + "/v1/classify", data=files[0].read_bytes(), timeout=30)
    assert r.status_code == 400 and "/v1/embeddings" in r.json()["error"], r.text


def test_kserve_embedding_from_pixel_values_beside_probabilities(serve):
    """A classifier's infer asking for probabilities and the embedding at once, from pixel_values: the probabilities
    as logits' softmax, the embedding as the library embeds the same tensor."""
    vit = pytest.importorskip("vit", reason="the Python module is not built (VIT_BUILD_PYTHON=OFF)")
    s = serve()
    c = vit.Classifier(str(DEIT))
    f = photos()[5]
    x = np.asarray(c.preprocess(str(f)), dtype=np.float32).reshape(1, 3, 224, 224)
    head = {"inputs": [{"name": "pixel_values", "datatype": "FP32", "shape": [1, 3, 224, 224], "data": x.ravel().tolist()}],
            "outputs": [{"name": "probabilities"}, {"name": "embedding", "parameters": {"binary_data": False}}]}
    r = requests.post(s.url + f"/v2/models/{NAME}/infer", json=head, timeout=60)
    assert r.status_code == 200, r.text[:300]
    out = {o["name"]: np.asarray(o["data"], np.float32) for o in r.json()["outputs"]}
    want = np.asarray(cli_embed(DEIT, [f], "--normalize")[f.name], np.float32)
    assert np.max(np.abs(out["embedding"] - want)) <= 1e-5  # from the preprocessed tensor, not the file
    assert abs(out["probabilities"].sum() - 1) < 1e-4 and out["probabilities"].shape == (1000,)


def test_model_repository_extension(serve):
    s = serve("-m", f"tower={layout_models() / 'openclip'}")
    assert "model_repository" in requests.get(s.url + "/v2", timeout=10).json()["extensions"]
    for body in (None, {"ready": True}, {}):
        r = requests.post(s.url + "/v2/repository/index", json=body, timeout=10)
        assert r.status_code == 200, r.text
        assert r.json() == [{"name": NAME, "version": "1", "state": "READY", "reason": ""},
                            {"name": "tower", "version": "1", "state": "READY", "reason": ""}]
    for action in ("load", "unload"):
        r = requests.post(s.url + f"/v2/repository/models/tower/{action}", timeout=10)
        assert r.status_code == 400 and "models are fixed at start (-m)" in r.json()["error"], r.text
    r = requests.post(s.url + "/v2/repository/models/nothing/load", timeout=10)
    assert r.status_code == 404 and f"this server has '{NAME}', 'tower'" in r.json()["error"]
    # Naming models: with two served, /v1/classify wants ?model=, and an unknown name is a 404 naming both.
    r = requests.post(s.url + "/v1/classify", data=photos()[0].read_bytes(), timeout=30)
    assert r.status_code == 400 and "name one with ?model=NAME" in r.json()["error"], r.text
    r = requests.post(s.url + "/v1/classify?model=nothing", data=photos()[0].read_bytes(), timeout=30)
    assert r.status_code == 404 and f"'{NAME}', 'tower'" in r.json()["error"]
    r = requests.post(s.url + f"/v1/classify?model={NAME}", data=photos()[0].read_bytes(), timeout=30)
    assert r.status_code == 200 and r.json()["top"]
    r = requests.post(s.url + "/v1/embeddings", json={"input": [data_uri(photos()[0])]}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"


def test_per_model_flags_and_start_up_errors(serve, tmp_path):
    """NAME=VALUE flags reach their model only (--pool: its embeddings); the same weights at f32 and int8 under two names answer as
    `vit classify` does at each; start-up refuses --name with several -m, two models of one name, a NAME= that
    names none, and a model that cannot be loaded (weights without their config.json; an --arch its config
    contradicts), each exit 2 naming it."""
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "model.safetensors").symlink_to(DEIT / "model.safetensors")
    s = serve("-m", f"deit-int8={DEIT}", "-m", f"deit-mean={DEIT}", "--precision", "deit-int8=int8", "--pool", "deit-mean=mean")
    line = s.stderr()
    assert f"model {NAME} (" in line and ", f32, 1000 classes" in line and "model deit-int8 (" in line and ", int8, 1000 classes" in line
    f = photos()[9]
    for name, precision in ((NAME, "f32"), ("deit-int8", "int8")):
        r = requests.post(s.url + f"/v1/classify?model={name}", data=f.read_bytes(), timeout=30)
        want = cli_top(DEIT, [f], "--precision", precision)[f.name]
        assert [(t["index"], t["prob"]) for t in r.json()["top"]][0] == (want[0][0], pytest.approx(want[0][2], abs=1e-6))
    # --pool NAME=mean: that model's embeddings are `vit embed --pool mean`'s, the other's its class token's.
    for name, args in ((NAME, ()), ("deit-mean", ("--pool", "mean"))):
        want = cli_embed(DEIT, [f], "--normalize", *args)[f.name]
        np.testing.assert_allclose(infer_embedding(s.url, name, [f.read_bytes()])[0], want, atol=1e-6)
    for args, fragment in ((["-m", str(DEIT), "-m", f"b={DEIT}", "--name", "x"], "--name names the one model"),
                           (["-m", str(DEIT), "-m", str(DEIT)], f"two models named '{NAME}'"),
                           (["-m", f"a={DEIT}", "--precision", "b=int8"], "--precision b=int8: no model named 'b'"),
                           (["-m", f"a={DEIT}", "--embedding", "a=cls"], "--embedding: 'cls' is not pre-logits or head"),
                           (["-m", f"a={DEIT}", "--pool", "a=max"], "--pool: pool 'max' is not one of 'cls', 'token'"),
                           (["-m", f"a={DEIT}", "-m", "broken=/nonexistent/model"], "model broken: /nonexistent/model"),
                           (["-m", f"a={DEIT}", "--text-embeddings", "a=/nonexistent.safetensors"], "model a: "),
                           (["-m", f"a={DEIT}", "-m", f"bare={tmp_path / 'bare'}"], "no config.json: the number of heads"),
                           (["-m", f"a={DEIT}", "--arch", "a=vit_tiny_patch16_224"],
                            "names the architecture deit_tiny_patch16_224: give one or the other")):
        r = subprocess.run([VIT_BINARY, "serve", "--port", "0", *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and fragment in r.stderr, (args, r.stderr)
    # --arch NAME=ARCH names the architecture of that model's weights: DeiT-Tiny's alone answer as with its config.
    s = serve("-m", f"bare={tmp_path / 'bare'}", "--arch", "bare=deit_tiny_patch16_224")
    r = requests.post(s.url + "/v1/classify?model=bare", data=f.read_bytes(), timeout=30)
    assert [(t["index"], t["prob"]) for t in r.json()["top"]] == [(i, pytest.approx(p, abs=1e-6)) for i, _, p in cli_top(DEIT, [f])[f.name]]


def test_zero_shot_labels_over_http(serve):
    """An OpenCLIP tower served with --text-embeddings answers /v1/classify and KServe probabilities with the
    file's labels, as `vit classify --text-embeddings` does."""
    tower = layout_models() / "openclip"
    labels = tower / "classes.safetensors"
    s = serve("-m", f"tower={tower}", "--text-embeddings", f"tower={labels}")
    files = photos()[:3]
    want = cli_top(tower, files, "--text-embeddings", str(labels))
    for f in files:
        r = requests.post(s.url + "/v1/classify?model=tower&topk=5", data=f.read_bytes(), timeout=30)
        assert r.status_code == 200, r.text
        got = [(t["index"], t["label"], t["prob"]) for t in r.json()["top"]]
        assert [g[:2] for g in got] == [w[:2] for w in want[f.name]]
        assert all(abs(g[2] - w[2]) <= 1e-6 for g, w in zip(got, want[f.name]))
    meta = requests.get(s.url + "/v2/models/tower", timeout=10).json()
    assert {o["name"] for o in meta["outputs"]} == {"probabilities", "logits", "top_indices", "top_probabilities", "embedding"}
    body, headers = binary_infer([files[0].read_bytes()], topk=2)
    r = requests.post(s.url + "/v2/models/tower/infer", data=body, headers=headers, timeout=30)
    out = {o["name"]: o["data"] for o in r.json()["outputs"]}
    assert out["top_indices"] == [w[0] for w in want[files[0].name][:2]]
    assert abs(out["probabilities"][out["top_indices"][0]] - want[files[0].name][0][2]) <= 1e-6
    # The DeiT beside it keeps its ImageNet classes.
    r = requests.post(s.url + f"/v1/classify?model={NAME}", data=files[0].read_bytes(), timeout=30)
    assert r.json()["top"][0]["label"] == cli_top(DEIT, files[:1])[files[0].name][0][1]
