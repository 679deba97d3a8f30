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
