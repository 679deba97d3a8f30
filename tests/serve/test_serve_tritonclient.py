"""`vit serve` through KServe v2's own Python client, tritonclient.http (from the Python package index into
.venv by scripts/setup.sh): server and model metadata, readiness, and infer with encoded images as BYTES
in binary form, asking for binary and JSON outputs, against `vit classify --json` (CTest label serve)."""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import DEIT, NAME, VIT_BINARY, photos

try:
    import tritonclient.http as httpclient
except ImportError:
    httpclient = None


def test_tritonclient_infer_bytes(serve):
    if httpclient is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but tritonclient is not installed (scripts/setup.sh puts it into .venv)")
        pytest.skip("tritonclient is not installed (scripts/setup.sh puts it into .venv)")
    s = serve()
    files = photos()[10:14]
    out = subprocess.run([VIT_BINARY, "classify", "--json", "-k", "3", "-m", str(DEIT), *map(str, files)],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    want = {json.loads(l)["file"].rsplit("/", 1)[-1]: json.loads(l)["top"] for l in out.splitlines()}
    client = httpclient.InferenceServerClient(url=f"127.0.0.1:{s.port}")
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready(NAME)
    meta = client.get_model_metadata(NAME)
    assert meta["name"] == NAME and {i["name"] for i in meta["inputs"]} == {"image", "pixel_values"}
    images = np.array([f.read_bytes() for f in files], dtype=np.object_)
    inp = httpclient.InferInput("image", [len(files)], "BYTES")
    inp.set_data_from_numpy(images, binary_data=True)
    outputs = [httpclient.InferRequestedOutput("top_indices", binary_data=True),
               httpclient.InferRequestedOutput("top_probabilities", binary_data=False),
               httpclient.InferRequestedOutput("probabilities", binary_data=True)]
    result = client.infer(NAME, [inp], outputs=outputs, parameters={"topk": 3})
    idx, prob = result.as_numpy("top_indices"), result.as_numpy("top_probabilities")
    probs = result.as_numpy("probabilities")
    assert idx.shape == (4, 3) and idx.dtype == np.int64 and probs.shape == (4, 1000)
    for b, f in enumerate(files):
        assert idx[b].tolist() == [t["index"] for t in want[f.name]]
        assert np.max(np.abs(prob[b] - [t["prob"] for t in want[f.name]])) <= 1e-6
        assert np.max(np.abs(probs[b][idx[b]] - prob[b])) <= 1e-6
    # A broken image is the request's 400, named, through the client's exception.
    bad = httpclient.InferInput("image", [1], "BYTES")
    bad.set_data_from_numpy(np.array([b"not an image"], dtype=np.object_), binary_data=True)
    with pytest.raises(Exception, match="input 'image' element 0"):
        client.infer(NAME, [bad])
    client.close()


def test_tritonclient_embedding_output(serve):
    """The docs/SERVING.md embedding example: `embedding` [B, E] from a headless model (the DINOv2 layout model)
    and from DeiT-Tiny beside its probabilities, equal to `vit embed --normalize`; normalize false through the
    request's parameters; the model repository index through the client."""
    if httpclient is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but tritonclient is not installed (scripts/setup.sh puts it into .venv)")
        pytest.skip("tritonclient is not installed (scripts/setup.sh puts it into .venv)")
    from conftest import cli_embed, layout_models
    dino = layout_models() / "hf_dinov2"
    s = serve("-m", f"dino={dino}")
    files = photos()[20:24]
    client = httpclient.InferenceServerClient(url=f"127.0.0.1:{s.port}")
    assert [m["name"] for m in client.get_model_repository_index()] == [NAME, "dino"]
    assert client.get_model_metadata("dino")["outputs"] == [{"name": "embedding", "datatype": "FP32", "shape": [-1, 64]}]
    images = np.array([f.read_bytes() for f in files], dtype=np.object_)
    for model, path, size in (("dino", dino, 64), (NAME, DEIT, 192)):
        inp = httpclient.InferInput("image", [len(files)], "BYTES")
        inp.set_data_from_numpy(images, binary_data=True)
        out = [httpclient.InferRequestedOutput("embedding", binary_data=True)]
        if model == NAME:
            out.append(httpclient.InferRequestedOutput("probabilities", binary_data=True))
        result = client.infer(model, [inp], outputs=out)
        got = result.as_numpy("embedding")
        assert got.shape == (4, size) and got.dtype == np.float32
        want = cli_embed(path, files, "--normalize")
        for row, f in zip(got, files):
            assert np.max(np.abs(row - np.asarray(want[f.name], np.float32))) <= 1e-6
        if model == NAME:
            assert result.as_numpy("probabilities").shape == (4, 1000)
        raw = client.infer(model, [inp], outputs=out[:1], parameters={"normalize": False}).as_numpy("embedding")
        want = cli_embed(path, files)
        assert np.max(np.abs(raw[0] - np.asarray(want[files[0].name], np.float32))) <= 1e-6
    with pytest.raises(Exception, match="models are fixed at start"):
        client.load_model("dino")
    client.close()


def test_tritonclient_with_model_version_1(serve):
    """The version every model's metadata lists, "1", through the client's model_version: readiness, metadata and
    infer answer as without it; another version is refused by name."""
    if httpclient is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but tritonclient is not installed (scripts/setup.sh puts it into .venv)")
        pytest.skip("tritonclient is not installed (scripts/setup.sh puts it into .venv)")
    s = serve()
    client = httpclient.InferenceServerClient(url=f"127.0.0.1:{s.port}")
    assert client.is_model_ready(NAME, "1")
    assert client.get_model_metadata(NAME, "1") == client.get_model_metadata(NAME)
    assert client.get_model_metadata(NAME)["versions"] == ["1"]
    files = photos()[:2]
    images = np.array([f.read_bytes() for f in files], dtype=np.object_)
    inp = httpclient.InferInput("image", [len(files)], "BYTES")
    inp.set_data_from_numpy(images, binary_data=True)
    out = [httpclient.InferRequestedOutput("top_indices", binary_data=True)]
    versioned = client.infer(NAME, [inp], outputs=out, model_version="1", parameters={"topk": 3})
    plain = client.infer(NAME, [inp], outputs=out, parameters={"topk": 3})
    assert versioned.as_numpy("top_indices").tolist() == plain.as_numpy("top_indices").tolist()
    assert versioned.get_response()["model_version"] == "1"
    assert not client.is_model_ready(NAME, "2")
    with pytest.raises(Exception, match="has no version '2'"):
        client.get_model_metadata(NAME, "2")
    with pytest.raises(Exception, match="has no version '2'"):
        client.infer(NAME, [inp], outputs=out, model_version="2")
    client.close()
