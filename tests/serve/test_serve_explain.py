"""`POST /v1/explain` on a real server (CTest serve_explain, label serve): the attention picture `vit explain` draws,
byte for byte, through the model's queue; an int8 model explained from its own passes, over the one copy of its
weights; a CLIP tower with text
embeddings explained with their labels; a NaFlex model's panorama and portrait over their own grids at --max-patches;
and every refusal a 400 naming the problem, the server answering the next request."""
import base64
import io
import json
import os
import re
import subprocess

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from conftest import DEIT, NAME, PHOTOS, REPO, VENV_PYTHON, VIT_BINARY, layout_models, photos, status_kb

PNG = b"\x89PNG\r\n\x1a\n"


def cli_picture(tmp_path, model, photo, *args):
    """The picture `vit explain` writes for one photo, and its --json line."""
    out = tmp_path / "pictures"
    r = subprocess.run([VIT_BINARY, "explain", "-m", str(model), "--json", "--out", str(out), "--force", *args, str(photo)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    line = json.loads(r.stdout.splitlines()[0])
    return (out / line["attention"].rsplit("/", 1)[-1]).read_bytes(), line


def test_explain_answers_vit_explains_picture(serve, tmp_path):
    """The default (rollout, 1024) and ?method=last&size=256 are `vit explain`'s pictures, byte for byte, sent as the
    body or as a one-file form; the model's metrics count them."""
    s = serve()
    photo = photos()[0]
    want, line = cli_picture(tmp_path, DEIT, photo)
    r = requests.post(s.url + "/v1/explain", data=photo.read_bytes(), timeout=120)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "image/png" and r.content == want
    assert r.headers["X-Attention-Precision"] == "f32"
    want_last, _ = cli_picture(tmp_path, DEIT, photo, "--method", "last", "--size", "256")
    r = requests.post(s.url + f"/v1/explain?model={NAME}&method=last&size=256",
                      files={"image": (photo.name, photo.read_bytes(), "image/jpeg")}, timeout=120)
    assert r.status_code == 200 and r.content == want_last
    assert r.content != want
    counts = {tuple(sorted(x.labels.items())): x.value for f in text_string_to_metric_families(
        requests.get(s.url + "/metrics", timeout=10).text) for x in f.samples if x.name == "vit_requests_total"}
    assert counts[(("endpoint", "/v1/explain"), ("model", NAME), ("status", "200"))] == 2


def test_explain_refusals_are_400s_naming_the_problem(serve, tmp_path):
    """A headless model (pointing to /v1/embeddings), a method or size out of range, not an image, two files, an
    unknown model: each a 400 or 404 with a message; the server explains the next photo."""
    dino = layout_models() / "hf_dinov2"
    s = serve("-m", f"dino={dino}")
    photo = photos()[1].read_bytes()
    cases = [
        (f"/v1/explain?model={NAME}&method=gradcam", {"data": photo}, 400, "method: 'gradcam' is neither rollout nor last"),
        (f"/v1/explain?model={NAME}&size=10", {"data": photo}, 400, "size: '10' is not a number from 64 to 8192"),
        (f"/v1/explain?model={NAME}", {"data": b"this is a text file, not a photo\n"}, 400, ""),
        (f"/v1/explain?model={NAME}", {"files": [("a", ("a.jpg", photo)), ("b", ("b.jpg", photo))]}, 400,
         "explain draws one image; the form has 2 files"),
        ("/v1/explain?model=dino", {"data": photo}, 400, "/v1/embeddings"),
        ("/v1/explain?model=nope", {"data": photo}, 404, "nope"),
        ("/v1/explain", {"data": photo}, 400, "?model=NAME"),
    ]
    for path, kw, status, message in cases:
        r = requests.post(s.url + path, timeout=60, **kw)
        assert r.status_code == status, (path, r.status_code, r.text)
        assert message in r.json()["error"], (path, r.text)
        assert r.json()["error"], path
    r = requests.post(s.url + f"/v1/explain?model={NAME}&size=128", data=photo, timeout=120)
    assert r.status_code == 200 and r.content.startswith(PNG)


def test_int8_model_is_explained_from_its_own_passes(serve, tmp_path):
    """A model served at int8 is explained over the weights it is served with, not a second copy loaded from disk:
    the maps come from its int8 passes, as the answer's X-Attention-Precision says, and the picture is close to
    `vit explain`'s f32 one; the process grows by less than an f32 copy of the weights would take; classification
    keeps answering at int8."""
    s = serve("--precision", "int8", "--threads", "1")
    photo = photos()[2]
    models = requests.get(s.url + "/v1/models", timeout=10).json()["data"]
    assert models[0]["vit"]["precision"] == "int8"
    f32_bytes = 4 * 5_717_416  # DeiT-Tiny's parameters in f32: what a second copy loaded for explaining would take
    r = requests.post(s.url + "/v1/classify", data=photo.read_bytes(), timeout=300)
    assert r.status_code == 200, r.text
    before_kb = status_kb(s.proc.pid, "VmRSS")
    r = requests.post(s.url + "/v1/explain?size=256", data=photo.read_bytes(), timeout=300)
    assert r.status_code == 200, r.text
    grown = (status_kb(s.proc.pid, "VmRSS") - before_kb) * 1024
    assert grown < f32_bytes, f"explaining grew the server by {grown} bytes, an f32 copy of the weights is {f32_bytes}"
    assert r.headers["X-Attention-Precision"] == "int8"
    want, _ = cli_picture(tmp_path, DEIT, photo, "--size", "256")
    import numpy as np
    from PIL import Image
    with Image.open(io.BytesIO(r.content)) as got_im, Image.open(io.BytesIO(want)) as want_im:
        got, wanted = np.asarray(got_im.convert("RGB"), float), np.asarray(want_im.convert("RGB"), float)
    assert got.shape == wanted.shape
    assert np.abs(got - wanted).mean() < 4, "int8's maps are close to f32's"
    r = requests.post(s.url + "/v1/classify", data=photo.read_bytes(), timeout=300)
    assert r.status_code == 200, r.text


def test_tower_with_text_embeddings_is_explained_with_their_labels(serve):
    """A CLIP tower served with --text-embeddings is explained (its top label from the file's labels, in the
    picture's caption); without them it has no class to explain."""
    tower = layout_models() / "openclip"
    labels = tower / "classes.safetensors"
    s = serve("-m", f"tower={tower}", "-m", f"bare={tower}", "--text-embeddings", f"tower={labels}", model=None)
    photo = photos()[0].read_bytes()
    r = requests.post(s.url + "/v1/explain?model=tower&size=128", data=photo, timeout=300)
    assert r.status_code == 200, r.text
    assert r.content.startswith(PNG)
    try:
        from PIL import Image
    except ImportError:
        pytest.skip("PIL is not installed")
    with Image.open(io.BytesIO(r.content)) as im:
        assert max(im.size) == 128
    r = requests.post(s.url + "/v1/explain?model=bare", data=photo, timeout=60)
    assert r.status_code == 400 and "/v1/embeddings" in r.json()["error"]


def naflex_classifier(tmp_path):
    """The shrunk SigLIP 2 NaFlex tower with a 5-class head that tests/make_naflex_model.py makes with timm, and its
    images (a 3000x600 panorama, a portrait); skips without the .venv's timm (fails under CI=true)."""
    if not VENV_PYTHON.exists() or subprocess.run([str(VENV_PYTHON), "-c", "import timm"],
                                                  capture_output=True).returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {VENV_PYTHON} lacks timm (scripts/setup.sh installs it)")
        pytest.skip(f"{VENV_PYTHON} lacks timm (pip install -r tests/requirements.txt); skipping")
    out = tmp_path / "naflex"
    photos3 = [str(PHOTOS / n) for n in ("n01440764_tench.JPEG", "n02123597_Siamese_cat.JPEG",
                                         "n02690373_airliner.JPEG")]
    r = subprocess.run([str(VENV_PYTHON), str(REPO / "tests" / "make_naflex_model.py"), str(out), *photos3],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, "tests/make_naflex_model.py failed:\n" + r.stderr[-3000:]
    return out / "classifier", out / "images"


def test_naflex_model_is_explained_over_each_images_own_grid(serve, tmp_path):
    """A NaFlex model served with --max-patches (the server warms it up with images, as it takes no fixed tensor):
    POST /v1/explain draws a panorama and a portrait as `vit explain --max-patches` draws them, byte for byte, each
    the whole photo at its own aspect ratio. The start-up line and /v1/models give its budget of patches, not a
    fixed input size; its KServe metadata lists no pixel_values input, and pixel_values sent get a 400."""
    model, images = naflex_classifier(tmp_path)
    s = serve("-m", f"flex={model}", "--max-patches", "flex=64", model=None)
    line = s.stderr()
    assert "NaFlex: each image at its own aspect ratio within 64 patches of 16 pixels (--max-patches))" in line, line
    assert not re.search(r"model flex \([^)]*\d+x\d+\)", line), line
    entry = requests.get(s.url + "/v1/models", timeout=10).json()["data"][0]
    assert (entry["id"], entry["vit"]["max_patches"], entry["vit"]["patch"]) == ("flex", 64, 16), entry
    # KServe: no fixed pixel_values input is listed, and one sent is a 400 naming what the model takes.
    meta = requests.get(s.url + "/v2/models/flex", timeout=10).json()
    assert [i["name"] for i in meta["inputs"]] == ["image"], meta
    h, w = entry["vit"]["input_size"]
    r = requests.post(s.url + "/v2/models/flex/infer", timeout=60, json={"inputs": [
        {"name": "pixel_values", "datatype": "FP32", "shape": [1, 3, h, w], "data": [0.0] * (3 * h * w)}]})
    assert r.status_code == 400 and "is a NaFlex model" in r.json()["error"] and "input 'image'" in r.json()["error"]
    assert str(model) not in r.text, r.text
    for name in ("panorama", "portrait"):
        photo = images / f"{name}.png"
        want, line = cli_picture(tmp_path, model, photo, "--max-patches", "64", "--size", "512")
        r = requests.post(s.url + "/v1/explain?model=flex&size=512", data=photo.read_bytes(), timeout=300)
        assert r.status_code == 200, r.text
        assert r.content == want, name
        assert line["top"][0]["label"].startswith("class_")
    try:
        from PIL import Image
    except ImportError:
        pytest.skip("PIL is not installed")
    with Image.open(io.BytesIO(want)) as im:
        assert im.size[1] > im.size[0], "the portrait is drawn taller than wide"


def test_naflex_usage_counts_the_tokens_each_image_ran(serve, tmp_path):
    """/v1/embeddings on a NaFlex model: usage.prompt_tokens is the sum of the tokens each image ran as (its own grid
    within --max-patches, as `vit inspect --image` gives it: a panorama or a 20x12 image runs fewer than the budget),
    not the budget times the images."""
    model, images = naflex_classifier(tmp_path)
    s = serve("-m", f"flex={model}", "--max-patches", "flex=64", model=None)
    files = [images / f"{name}.png" for name in ("panorama", "portrait", "small", "pixel")]
    want = 0
    for f in files:
        out = subprocess.run([VIT_BINARY, "inspect", str(model), "--max-patches", "64", "--image", str(f)],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        want += int(re.search(r"\((\d+) tokens\)", out).group(1))
    inputs = ["data:image/png;base64," + base64.b64encode(f.read_bytes()).decode() for f in files]
    r = requests.post(s.url + "/v1/embeddings", json={"model": "flex", "input": inputs}, timeout=300)
    assert r.status_code == 200, r.text[:300]
    usage = r.json()["usage"]
    assert usage["prompt_tokens"] == usage["total_tokens"] == want, (usage, want)
    assert want < len(files) * 64
