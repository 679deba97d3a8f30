"""The package as a user installs it (CTest label python): the wheels build_wheels.sh made for this run from
the source distribution (fixture python_wheel), each installed with pip into fresh virtual environments
without system site packages, one with numpy 1.x and one with numpy 2.x, for the build tree's Python (3.11,
Debian's) and for pyenv's other Pythons (3.12 by default; a skip message without pyenv), and the 3.11 wheel
also into an environment of pyenv's 3.11. In each: the environment runs on the interpreter it was made from,
`import vit` comes from the environment, classify() of the 250 sample photos equals `vit classify --json` entry for entry, logits() of
32 of them are the same bits under numpy 1.x and 2.x, a uint8 array classifies as the same pixels in a file, OpenCV's
plugins load beside the module (WebP), and the environment's bin/vit runs (--version, a WebP) with the
type stubs installed."""
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests"))
from shared_data import DEIT, PHOTOS, REPO, SHARED, VIT_BINARY, require  # noqa: E402

WHEELS = pathlib.Path(os.environ.get("VIT_WHEEL_DIR", REPO / "build" / "python" / "wheels"))
PYENV = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))
NUMPYS = {"numpy1": "numpy>=1.21,<2", "numpy2": "numpy>=2,<3"}
BUILD_TAG = "cp%d%d" % sys.version_info[:2]  # the build tree's Python, which runs this test


def wheel(tag):
    found = sorted(WHEELS.glob(f"vit-*-{tag}-{tag}-*.whl"))
    return found[-1] if found else None


def base_python(tag, interpreter):
    """The interpreter a fresh environment for this wheel is made from: the build tree's (the .venv's base,
    Debian's python3) or pyenv's of that version."""
    if interpreter == "build":
        return getattr(sys, "_base_executable", sys.executable)
    version = f"{tag[2]}.{tag[3:]}"
    found = sorted(PYENV.glob(f"versions/{version}.*/bin/python3"))
    return str(found[-1]) if found else None


def cases():
    """Each wheel with numpy 1.x and 2.x in environments of the Python it was built by; the build tree's wheel
    also in one of pyenv's Python of the same version (another interpreter at another path, as a user's venv,
    uv or conda Python is), with the numpy a new environment gets (2.x)."""
    other = os.environ.get("VIT_WHEEL_PYTHONS", "3.12").split()
    build = [pytest.param(BUILD_TAG, "build", n, id=f"{BUILD_TAG}-{n}") for n in NUMPYS]
    build.append(pytest.param(BUILD_TAG, "pyenv", "numpy2", id=f"{BUILD_TAG}-pyenv-numpy2"))
    tags = ["cp" + v.replace(".", "") for v in other]
    return build + [pytest.param(tag, "pyenv", n, id=f"{tag}-{n}") for tag in tags for n in NUMPYS]


# Run inside each environment: classify and logits of the photos, an array against the same pixels in a
# PPM file, a WebP through OpenCV's plugin.
IN_ENV = r"""
import json, sys
import numpy as np
import vit
model, out, webp, photos = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
c = vit.Classifier(model, threads=2, batch=8)
x = np.stack([c.preprocess(p) for p in photos[:32]])
np.save(out + ".npy", c.logits(x))
a = np.random.default_rng(1).integers(0, 256, (61, 83, 3), dtype=np.uint8)
with open(out + ".ppm", "wb") as f:
    f.write(b"P6\n83 61\n255\n" + a.tobytes())
json.dump({"vit": vit.__file__, "base_prefix": sys.base_prefix, "numpy": np.__version__, "version": vit.__version__,
           "classify": c.classify(photos, topk=5),
           "array": c.classify([a, a[:, ::-1][:, ::-1]], topk=5), "ppm": c.classify([out + ".ppm"], topk=5),
           "webp": c.classify([webp], topk=5)}, open(out + ".json", "w"))
"""


@pytest.fixture(scope="module")
def photos():
    require(DEIT.is_dir() and PHOTOS.is_dir(), f"the test data is missing: {SHARED} (set VIT_SHARED_DATA)")
    files = sorted(str(p) for p in PHOTOS.glob("*.JPEG"))
    assert len(files) == 250
    return files


@pytest.fixture(scope="module")
def cli(photos, tmp_path_factory):
    """`vit classify --json --save-logits` of the photos (batch 8, 2 threads), and a WebP of the first."""
    root = tmp_path_factory.mktemp("cli")
    run = subprocess.run([VIT_BINARY, "classify", "--model", str(DEIT), "--batch", "8", "--threads", "2", "--topk", "5",
                          "--json", "--save-logits", str(root / "logits.safetensors")] + photos,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    from PIL import Image
    webp = root / "tench.webp"
    Image.open(photos[0]).save(webp, lossless=True)
    return [json.loads(line) for line in run.stdout.splitlines()], webp


logits_by_tag = {}


@pytest.mark.parametrize("tag,interpreter,numpy", cases())
def test_the_wheel_in_a_fresh_environment(tag, interpreter, numpy, photos, cli, tmp_path):
    whl, python = wheel(tag), base_python(tag, interpreter)
    if python is None:
        pytest.skip(f"no Python {tag[2]}.{tag[3:]} under {PYENV}/versions: its wheel is not tested")
    if tag == "cp313" and numpy == "numpy1":
        pytest.skip("numpy 1.x has no wheels for Python 3.13")
    assert whl is not None, f"no {tag} wheel in {WHEELS}: build_wheels.sh (CTest python_wheel) makes it"
    if interpreter == "pyenv" and tag == BUILD_TAG:
        assert os.path.realpath(python) != os.path.realpath(base_python(tag, "build")), python
    env = WHEELS.parent / "envs" / f"{tag}-{interpreter}-{numpy}"  # kept until the next run, to look into
    subprocess.run(["rm", "-rf", str(env)], check=True)
    subprocess.run([python, "-m", "venv", str(env)], check=True)  # without system site packages
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + [str(whl), NUMPYS[numpy]], check=True)
    out = tmp_path / "out"
    run = subprocess.run([str(env / "bin" / "python"), "-c", IN_ENV, str(DEIT), str(out), str(cli[1])] + photos,
                         capture_output=True, text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    got = json.loads((out.with_suffix(".json")).read_text())
    assert got["vit"].startswith(str(env)), got["vit"]
    assert got["base_prefix"] == str(pathlib.Path(python).resolve().parents[1]), (got["base_prefix"], python)
    assert got["numpy"].startswith("1." if numpy == "numpy1" else "2."), got["numpy"]
    assert got["classify"] == cli[0]  # file, index, label and probability of every entry
    assert got["array"][0]["top"] == got["array"][1]["top"] == got["ppm"][0]["top"]
    assert got["array"][0]["file"] == "<array 0>"
    assert got["webp"][0]["top"][0]["label"] == "tench", got["webp"]
    logits = np.load(out.with_suffix(".npy"))
    assert logits.shape == (32, 1000) and logits.dtype == np.float32
    other = logits_by_tag.setdefault(tag, logits)
    np.testing.assert_array_equal(logits, other)  # numpy 1.x and 2.x, either interpreter: the same bits
    # The command in the environment's bin/, and the stubs beside the module.
    version = subprocess.run([str(env / "bin" / "vit"), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == f"vit {got['version']}", (version.stdout, version.stderr)
    labelled = subprocess.run([str(env / "bin" / "vit"), "classify", "-m", str(DEIT), "--json", str(cli[1])],
                              capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert labelled.returncode == 0, labelled.stderr
    assert json.loads(labelled.stdout)["top"] == got["webp"][0]["top"]
    package = pathlib.Path(got["vit"]).parent
    assert (package / "_vit.pyi").is_file() and (package / "py.typed").is_file()
    print(f"\n{whl.name} in a fresh environment of {python} with numpy {got['numpy']}: 250 photos as the CLI's, "
          f"bin/vit runs")


def test_the_source_distribution_is_the_size_docs_python_says():
    """docs/PYTHON.md gives the sdist's size; the one build_wheels.sh made for this run is within a fifth of it."""
    sdists = sorted(WHEELS.glob("vit-*.tar.gz"))
    require(sdists, f"no source distribution in {WHEELS} (the python_wheel test makes it)")
    said = re.search(r"the engine's sources, about ([\d.]+) (KB|MB)", (REPO / "docs" / "PYTHON.md").read_text())
    assert said, "docs/PYTHON.md gives no size of the source distribution"
    documented = float(said.group(1)) * (1e3 if said.group(2) == "KB" else 1e6)
    size = sdists[-1].stat().st_size
    assert abs(size - documented) <= 0.2 * documented, f"{sdists[-1].name}: {size / 1e3:.0f} KB; docs/PYTHON.md: {said.group(0)}"
