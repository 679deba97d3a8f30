"""What the `vit serve` tests share: the real server on a free loopback port, started per test and always
killed when the test ends (pass, fail or timeout), and the sample photos. CTest (labels serve, slow) sets
VIT_BINARY; the DeiT-Tiny weights and photos come from ../shared/data."""
import json
import os
import pathlib
import re
import signal
import struct
import subprocess
import sys
import threading
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests"))
from shared_data import DEIT, PHOTOS, REPO, VIT_BINARY, require_shared_data  # noqa: E402

NAME = "deit_tiny_patch16_224.fb_in1k"


def photos():
    return sorted(PHOTOS.glob("*.JPEG"))


VENV_PYTHON = REPO / ".venv" / "bin" / "python"
LAYOUT_SCRIPTS = [REPO / "tests" / "make_layout_models.py", REPO / "scripts" / "export_text_embeddings.py"]
TEXT_SCRIPTS = [REPO / "tests" / "make_text_models.py", REPO / "tests" / "make_layout_models.py",
                REPO / "tests" / "record_imports.py"]


def generated(name, scripts, modules, env=""):
    """The folder beside the vit binary that scripts[0] makes from three sample photos: made once per build tree,
    again when one of the scripts changes (they are copied into it), under a lock, by the .venv's Python. Skips
    without its modules (fails under CI=true)."""
    require_shared_data()
    folder = pathlib.Path(VIT_BINARY).parent / name

    def same():
        return all((folder / s.name).is_file() and (folder / s.name).read_bytes() == s.read_bytes() for s in scripts)

    if same():
        return folder
    if not VENV_PYTHON.exists() or subprocess.run([str(VENV_PYTHON), "-c", "import " + ", ".join(modules)],
                                                  capture_output=True).returncode != 0:
        lacks = f"{VENV_PYTHON} lacks one of {', '.join(modules)}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {lacks} (scripts/setup.sh installs them)")
        pytest.skip(f"{lacks} (pip install -r tests/requirements.txt); skipping")
    tmp = f"{folder}.tmp"
    photos3 = [str(PHOTOS / n) for n in ("n01440764_tench.JPEG", "n02123597_Siamese_cat.JPEG",
                                         "n02690373_airliner.JPEG")]
    same_sh = " && ".join(f"cmp -s {s} {folder}/{s.name}" for s in scripts)
    make = (f"{same_sh} || {{ rm -rf {tmp} && {env.format(tmp=tmp)}{VENV_PYTHON} {scripts[0]} {tmp} {' '.join(photos3)} "
            f"&& cp {' '.join(map(str, scripts))} {tmp}/ && rm -rf {folder} && mv {tmp} {folder}; }}")
    r = subprocess.run(["flock", f"{folder}.lock", "sh", "-c", make], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and same(), f"{scripts[0]} failed:\n" + r.stderr[-3000:]
    return folder


def layout_models():
    """The shrunk models of tests/make_layout_models.py (a DINOv2, CLIP and SigLIP towers, OpenCLIP folders with
    text embeddings), made as the layouts tests make them."""
    return generated("layout_models", LAYOUT_SCRIPTS, ["transformers", "open_clip"])


def text_models():
    """The shrunk CLIP and SigLIP models with both towers of tests/make_text_models.py, made as the text tests make
    them (tests/reference_models.cpp: the same folder), their imports recorded for the dependency audit."""
    userbase = pathlib.Path(VIT_BINARY).parent / "python-imports" / "userbase"
    return generated("text_models", TEXT_SCRIPTS, ["transformers", "open_clip", "ftfy", "sentencepiece"],
                     f"PYTHONUSERBASE={userbase} VIT_IMPORT_LOG={{tmp}}/imports ")


def sanitized_binary():
    """Whether vit is the AddressSanitizer build (scripts/test.sh --sanitize)."""
    return b"__asan_init" in pathlib.Path(VIT_BINARY).read_bytes()


def metrics(url):
    """{(name, labels as a sorted tuple): value} from /metrics, through prometheus_client's parser."""
    r = requests.get(url + "/metrics", timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def wait_for_metric(url, key, done, what, timeout):
    """Reads /metrics until done(the sample `key`'s value) holds; fails with `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not done(metrics(url)[key]):
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def status_kb(pid, key):
    """A line of /proc/PID/status in KiB: VmRSS (resident now) or VmHWM (its peak)."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/{pid}/status")


class Server:
    """`vit serve ARGS --port 0`: waits for its start-up line and readiness; kill() is safe to call twice."""

    def __init__(self, *args, ready=True, timeout=120, model=DEIT):
        self.stderr_lines = []
        self.proc = subprocess.Popen([VIT_BINARY, "serve", *(["-m", str(model)] if model else []), "--port", "0", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.port = None
        found = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.stderr_lines.append(line)
                m = re.search(r"at http://127\.0\.0\.1:(\d+),", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    found.set()
            found.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not found.wait(timeout) or self.port is None:
            self.kill()
            raise AssertionError("no start-up line from vit serve:\n" + "".join(self.stderr_lines))
        self.url = f"http://127.0.0.1:{self.port}"
        try:
            deadline = time.monotonic() + timeout
            while ready and requests.get(self.url + "/v2/health/ready", timeout=10).status_code != 200:
                assert time.monotonic() < deadline, "the server never became ready"
                time.sleep(0.05)
        except BaseException:  # the fixture never sees this server: end it here
            self.kill()
            raise

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait(self, timeout=60):
        code = self.proc.wait(timeout)
        self.reader.join(10)
        return code

    def stderr(self):
        return "".join(self.stderr_lines)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture
def serve():
    """serve(*args) starts a server; every server started is killed when the test ends, however it ends."""
    started = []

    def start(*args, **kw):
        require_shared_data()
        s = Server(*args, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.kill()


def png_bomb(side, rgba16=True):
    """A PNG of side x side pixels that is a few hundred KB: one colour, 16-bit RGBA (the costliest image to
    decode, 8 bytes a pixel before conversion) or 8-bit RGB."""
    import zlib
    channels, depth, colour = (4, 16, 6) if rgba16 else (3, 8, 2)
    pixel = b"\x75\x30" * channels if rgba16 else b"\x78\x1e\xc8"
    row = b"\x00" + pixel * side
    z = zlib.compressobj(9)
    data = b"".join(z.compress(row) for _ in range(side)) + z.flush()

    def chunk(kind, payload):
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, depth, colour, 0, 0, 0)) +
            chunk(b"IDAT", data) + chunk(b"IEND", b""))


def data_uri(path):
    """An image file as a data URI, as OpenAI's clients send images."""
    import base64
    kind = "png" if str(path).lower().endswith(".png") else "jpeg"
    return f"data:image/{kind};base64," + base64.b64encode(pathlib.Path(path).read_bytes()).decode()


def cli_embed(model, paths, *args):
    """`vit embed` on paths as JSON lines: {file name: embedding}."""
    out = subprocess.run([VIT_BINARY, "embed", "-m", str(model), *args, *map(str, paths)], capture_output=True,
                         text=True, timeout=600, check=True).stdout
    return {json.loads(l)["file"].rsplit("/", 1)[-1]: json.loads(l)["embedding"] for l in out.splitlines()}


def require_module(name, how):
    """Imports a module the test needs from the .venv; skips without it (fails under CI=true)."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {name} is not installed ({how})")
        pytest.skip(f"{name} is not installed ({how})")


def binary_infer(images, outputs=None, topk=None, binary_output=False, extra=b"", parameters=None):
    """A KServe v2 request in the binary-data form, as tritonclient.http sends BYTES: the JSON header, then
    each element as a 4-byte little-endian length and its bytes."""
    raw = b"".join(struct.pack("<I", len(b)) + b for b in images)
    head = {"inputs": [{"name": "image", "datatype": "BYTES", "shape": [len(images)],
                        "parameters": {"binary_data_size": len(raw)}}]}
    if outputs:
        head["outputs"] = [{"name": o, "parameters": {"binary_data": binary_output}} for o in outputs]
    if topk or parameters:
        head["parameters"] = {**({"topk": topk} if topk else {}), **(parameters or {})}
    h = json.dumps(head).encode()
    return h + raw + extra, {"Inference-Header-Content-Length": str(len(h)), "Content-Type": "application/octet-stream"}


def decode_binary_response(r):
    """The outputs of a binary-data answer: {name: (datatype, shape, values)}."""
    n = int(r.headers["Inference-Header-Content-Length"])
    head, raw, at, out = json.loads(r.content[:n]), r.content[n:], 0, {}
    for o in head["outputs"]:
        if "data" in o:
            out[o["name"]] = (o["datatype"], o["shape"], o["data"])
            continue
        size = o["parameters"]["binary_data_size"]
        fmt = "<%d%s" % (size // (8 if o["datatype"] == "INT64" else 4), "q" if o["datatype"] == "INT64" else "f")
        out[o["name"]] = (o["datatype"], o["shape"], list(struct.unpack(fmt, raw[at:at + size])))
        at += size
    return out
