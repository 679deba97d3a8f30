"""The Spark job (CTest label spark). As a cluster runs it: spark-submit on local-cluster[2,1,2048] (two
executor JVMs with their own Python workers), the package shipped as a packed virtual environment holding
the wheel of this run (python/packaging/build_wheels.sh), numpy, pandas and pyarrow (--archives
env.tar.gz#env, PYSPARK_PYTHON=./env/bin/python) and the model as another archive: its rows for the 250
sample photos and a few broken files equal `vit classify --json`, its --embed rows `vit embed`'s. On a local
master of 2 threads with the build tree's package (scripts/spark-classify.sh): the same from local paths
(JSON lines) and from file: URIs (Parquet), and its usage errors. Rows equal: top-5 indices identical,
probabilities within 1e-5, one error row per broken file. Run by the .venv Python that scripts/setup.sh makes
(PySpark, pyarrow)."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from shared_data import DEIT, PHOTOS, REPO, SHARED, VIT_BINARY, require  # noqa: E402

JOB = REPO / "scripts" / "spark-classify.sh"
WHEELS = pathlib.Path(os.environ.get("VIT_WHEEL_DIR", REPO / "build" / "python" / "wheels"))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    require(DEIT.is_dir() and PHOTOS.is_dir(), f"the test data is missing: {SHARED} (set VIT_SHARED_DATA)")
    try:
        import pyspark  # noqa: F401
    except ImportError:
        require(False, "PySpark is not installed here (scripts/setup.sh puts it in .venv)")
    bad = tmp_path_factory.mktemp("bad")
    (bad / "broken file.jpg").write_text("named like a JPEG, but text")
    (bad / "empty.png").write_bytes(b"")
    (bad / "truncated.JPEG").write_bytes((PHOTOS / "n01440764_tench.JPEG").read_bytes()[:3000])
    (bad / "notes.txt").write_text("not an image name: folders give only image files")
    from PIL import Image  # two good images in the formats OpenCV's plugin reads
    Image.open(PHOTOS / "n01440764_tench.JPEG").save(bad / "tench.WebP", lossless=True)
    Image.open(PHOTOS / "n01440764_tench.JPEG").resize((200, 150)).save(bad / "small tench.tif")
    return [str(PHOTOS), str(bad)], bad


def run_job(*args, expect):
    cmd = [str(JOB), "--model", str(DEIT), "--batch", "8", *map(str, args)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == expect, f"{cmd}\nexit {run.returncode}\n{run.stderr[-3000:]}"
    return run


def cli_rows(paths):
    run = subprocess.run([VIT_BINARY, "classify", "--model", str(DEIT), "--json", "--topk", "5", *paths],
                         capture_output=True, text=True)
    assert run.returncode in (0, 1), run.stderr
    return {r["file"]: r for r in map(json.loads, run.stdout.splitlines())}


def assert_same(job, cli):
    """Rows keyed by file: the same files, the same errors, the same top-5 with probabilities within 1e-5."""
    assert sorted(job) == sorted(cli)
    worst = 0.0
    for name, want in cli.items():
        got = job[name]
        if "error" in want:
            assert got.get("error") == want["error"] and not got.get("top"), (name, got)
            continue
        assert got.get("error") is None, (name, got)
        assert [t["index"] for t in got["top"]] == [t["index"] for t in want["top"]], name
        assert [t["label"] for t in got["top"]] == [t["label"] for t in want["top"]], name
        worst = max(worst, max(abs(g["prob"] - w["prob"]) for g, w in zip(got["top"], want["top"])))
    assert worst <= 1e-5
    return worst


def job_rows(out):
    """The job's JSON rows, by file; a file with two rows fails."""
    job = {}
    for part in sorted(out.glob("part-*.json")):
        for line in part.read_text().splitlines():
            row = json.loads(line)
            assert row["file"] not in job, f"two rows for {row['file']}"
            job[row["file"]] = row
    return job

def test_json_rows_equal_the_cli(inputs, tmp_path):
    paths, bad = inputs
    out = tmp_path / "out"
    run = run_job("--out", out, *paths, expect=1)  # 1: some images failed, their rows say why
    job = job_rows(out)
    cli = cli_rows(paths)
    assert len(cli) == 255
    worst = assert_same(job, cli)
    errors = sorted(name for name, row in job.items() if "error" in row)
    assert errors == sorted(str(bad / n) for n in ("broken file.jpg", "empty.png", "truncated.JPEG"))
    assert "255 images: 252 classified, 3 failed" in run.stdout
    print(f"\n255 rows equal `vit classify --json`: top-5 indices identical, largest |prob difference| {worst:.2g}")


def test_parquet_rows_from_uris_equal_the_cli(inputs, tmp_path):
    import pyarrow.parquet as pq

    paths, bad = inputs
    photos = sorted(PHOTOS.glob("*.JPEG"))[:12]
    files = [str(p) for p in photos] + [str(bad / n) for n in ("truncated.JPEG", "tench.WebP", "small tench.tif")]
    out = tmp_path / "out"
    # file: URIs go through Spark's binaryFile source (as hdfs: or s3a: ones would), bytes to the engine.
    run_job("--format", "parquet", "--topk", "5", "--threads", "2", "--out", out,
            *["file://" + f for f in files], expect=1)
    table = pq.read_table(out).to_pylist()
    job = {r["file"]: {k: v for k, v in r.items() if v is not None} for r in table}
    cli = {"file://" + name: row for name, row in cli_rows(files).items()}
    assert len(cli) == 15
    assert_same(job, cli)


def test_parquet_embeddings_equal_vit_embed(inputs, tmp_path):
    import numpy as np
    import pyarrow.parquet as pq

    paths, bad = inputs
    files = [str(p) for p in sorted(PHOTOS.glob("*.JPEG"))[:10]] + [str(bad / "truncated.JPEG")]
    out = tmp_path / "out"
    run_job("--embed", "--normalize", "--pool", "mean", "--format", "parquet", "--out", out, *files, expect=1)
    rows = {r["file"]: r for r in pq.read_table(out).to_pylist()}
    assert sorted(rows) == sorted(files)
    assert rows[files[-1]]["embedding"] is None and rows[files[-1]]["error"]
    emb = tmp_path / "emb.safetensors"
    cli = subprocess.run([VIT_BINARY, "embed", "--model", str(DEIT), "--normalize", "--pool", "mean", "-o", str(emb),
                          *files],
                         capture_output=True, text=True)
    assert cli.returncode == 1, cli.stderr
    data = emb.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    want = np.frombuffer(data[8 + n:], dtype="<f4").reshape(header["embeddings"]["shape"])
    assert json.loads(header["__metadata__"]["files"]) == files[:-1]
    got = np.array([rows[f]["embedding"] for f in files[:-1]], dtype=np.float32)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_naflex_embeddings_with_max_patches_equal_vit_embed(inputs, tmp_path):
    """A NaFlex tower (SigLIP 2's naflexvit_*, written small and random in naflexvit.py's names by the Python
    module's tests) over photos of several shapes at --max-patches 12: the job's embeddings equal vit embed's."""
    import numpy as np

    sys.path.insert(0, str(REPO / "python" / "tests"))
    from test_logits import timm_naflex

    model = timm_naflex(tmp_path / "naflex")
    files = [str(p) for p in sorted(PHOTOS.glob("*.JPEG"))[:12]]
    out = tmp_path / "out"
    run_job("--embed", "--model", model, "--max-patches", "12", "--out", out, *files, expect=0)
    rows = job_rows(out)
    cli = subprocess.run([VIT_BINARY, "embed", "--model", str(model), "--max-patches", "12", *files],
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    want = {r["file"]: r["embedding"] for r in map(json.loads, cli.stdout.splitlines())}
    assert sorted(rows) == sorted(want) == sorted(files)
    for f in files:
        np.testing.assert_allclose(rows[f]["embedding"], want[f], atol=1e-6)


def test_a_checkpoint_without_its_config_runs_with_arch(inputs, tmp_path):
    """DeiT-Tiny's weights alone: refused (exit 2) naming what the tensors do not say; with --arch naming its
    architecture, the rows of the model with its config.json."""
    paths, bad = inputs
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "model.safetensors").symlink_to(DEIT / "model.safetensors")
    run = run_job("--model", bare, "--out", tmp_path / "o", paths[1], expect=2)
    assert "no config.json: the number of heads" in run.stderr and "(--arch, e.g. --arch" in run.stderr, run.stderr
    out = tmp_path / "out"
    run_job("--model", bare, "--arch", "deit_tiny_patch16_224", "--out", out, paths[1], expect=1)
    assert_same(job_rows(out), cli_rows([paths[1]]))


def test_folder_glob_takes_what_find_images_takes(tmp_path):
    """The binaryFile filter for folder URIs and vit.find_images for local folders take the same names."""
    import fnmatch
    import classify
    import vit
    names = [f"x.{e}" for e in ("jpg", "JPEG", "Png", "bmp", "webp", "WEBP", "tif", "TIFF", "jp2", "J2K", "gif",
                                "txt", "mp4", "jpe", "tga", "heic")]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    taken = {pathlib.Path(f["file"]).name for f in vit.find_images([tmp_path])}
    patterns = classify.FOLDER_GLOB[3:-1].split(",")  # "*.{a,b}": Hadoop's braces, which fnmatch lacks
    globbed = {n for n in names if any(fnmatch.fnmatchcase(n, "*." + p) for p in patterns)}
    assert taken == globbed and "x.webp" in taken and "x.gif" not in taken


def test_default_model_is_found_from_another_folder(tmp_path):
    """Run from elsewhere without --model: the repository's default model is loaded (then the missing input
    ends the run, before Spark starts), not weights/ under the current folder."""
    require((REPO / "weights" / "deit_tiny_patch16_224.fb_in1k").is_dir(),
            "the default model is missing from weights/ (weights/get_default_model.sh fetches it)")
    run = subprocess.run([str(JOB), "--out", str(tmp_path / "o"), str(tmp_path / "absent")], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    assert "absent: no such file or folder" in run.stderr, run.stderr


def test_usage_errors_exit_2_before_any_work(inputs, tmp_path):
    paths, _ = inputs
    (tmp_path / "exists").mkdir()
    cases = [
        (["--out", tmp_path / "exists", paths[1]], "already exists (--force replaces it)"),
        (["--out", tmp_path / "o", tmp_path / "absent"], "absent: no such file or folder"),
        (["--out", tmp_path / "o", "--topk", "0", paths[1]], "--topk must be at least 1, got 0"),
        (["--out", tmp_path / "o"], "no INPUT given"),
        (["--out", tmp_path / "o", "--pool", "max", paths[1]], "invalid choice: 'max'"),
        (["--out", tmp_path / "o", "--model", tmp_path / "no-model", paths[1]], "no-model"),
        (["--out", tmp_path / "o", "--max-patches", "64", paths[1]], "--max-patches applies to NaFlex models"),
        (["--out", tmp_path / "o", "--max-patches", "64", paths[1]], "(timm's naflexvit_*, and SigLIP towers"),
        (["--out", tmp_path / "o", "--max-patches", "-1", paths[1]], "--max-patches must be 0 (256) or more, got -1"),
        # The engine's model-wide options are the job's flags too, with their ranges and their errors by flag.
        (["--out", tmp_path / "o", "--img-size", "-8", paths[1]], "--img-size must be 0 (the model's own) or more, got -8"),
        (["--out", tmp_path / "o", "--img-size", "36", paths[1]], "image size 36 is not a multiple of the model's patch size 16"),
        (["--out", tmp_path / "o", "--labels", tmp_path / "no-labels.txt", paths[1]], "no-labels.txt"),
        # DeiT-Tiny's config.json names its architecture: --arch may name the same one only.
        (["--out", tmp_path / "o", "--arch", "vit_tiny_patch16_224", paths[1]],
         "names the architecture deit_tiny_patch16_224: give one or the other"),
    ]
    for args, message in cases:
        run = run_job(*args, expect=2)
        assert message in run.stderr, (args, run.stderr)
        assert not (tmp_path / "o").exists()


# ---- local-cluster: separate executors, the package shipped in a packed virtual environment


@pytest.fixture(scope="module")
def packed(inputs, tmp_path_factory):
    """env.tar.gz: a virtual environment (no system packages) of this Python's version holding the wheel and
    spark/requirements.txt's packages but PySpark (executors get it from Spark's own pyspark.zip), packed as
    a cluster user packs one; model.tar.gz: the model folder. Returns (env folder, its archive, the model's)."""
    tag = "cp%d%d" % sys.version_info[:2]
    wheels = sorted(WHEELS.glob(f"vit-*-{tag}-{tag}-*.whl"))
    require(wheels, f"no {tag} wheel in {WHEELS} (CTest's python_wheel builds it)")
    root = WHEELS.parent / "spark-env"  # in the build tree, kept until the next run
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    env = root / "env"
    t0 = time.perf_counter()
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(env)], check=True)
    requirements = [line.split("#")[0].strip() for line in (REPO / "spark" / "requirements.txt").read_text().splitlines()]
    requirements = [r for r in requirements if r and not r.lower().startswith("pyspark")]
    subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(wheels[-1]), *requirements], check=True)
    subprocess.run(["tar", "-czf", str(root / "env.tar.gz"), "-C", str(env), "."], check=True)
    subprocess.run(["tar", "-czf", str(root / "model.tar.gz"), "-C", str(DEIT), "."], check=True)
    print(f"\npacked environment ({wheels[-1].name}, {' '.join(requirements)}): "
          f"{(root / 'env.tar.gz').stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t0:.0f} s")
    return env, root / "env.tar.gz", root / "model.tar.gz"


def submit(packed, *args, expect):
    """spark-submit of spark/classify.py on local-cluster[2,1,2048], as a cluster user runs it; removes the
    executors' work folder of its application ($SPARK_HOME/work/APP) afterwards."""
    import pyspark

    env, env_archive, model_archive = packed
    spark_home = pathlib.Path(pyspark.__file__).parent
    cmd = [str(spark_home / "bin" / "spark-submit"), "--master", "local-cluster[2,1,2048]",
           "--archives", f"{env_archive}#env,{model_archive}#model", str(REPO / "spark" / "classify.py"),
           "--threads", "1", "--model", str(DEIT), "--executor-model", "model", *map(str, args)]
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    environment.update(PYSPARK_PYTHON="./env/bin/python", PYSPARK_DRIVER_PYTHON=str(env / "bin" / "python"))
    t0 = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, env=environment)
    elapsed = time.perf_counter() - t0
    # The driver's stderr comes out on spark-submit's stdout (PySpark's runner merges the two), amid the JVM's log.
    app = re.search(r"application (app-[0-9-]+) on (local-cluster\[[0-9,]+\]|\S+)", run.stdout + run.stderr)
    if app:
        shutil.rmtree(spark_home / "work" / app.group(1), ignore_errors=True)
    assert run.returncode == expect, f"{cmd}\nexit {run.returncode}\n{run.stderr[-5000:]}"
    assert app and app.group(2) == "local-cluster[2,1,2048]", (run.stdout + run.stderr)[-3000:]  # spark-submit's master, not ours
    return run, elapsed


def test_local_cluster_rows_equal_the_cli(packed, inputs, tmp_path):
    paths, bad = inputs
    out = tmp_path / "out"
    run, elapsed = submit(packed, "--out", out, *paths, expect=1)
    job = job_rows(out)
    cli = cli_rows(paths)
    assert len(cli) == 255
    worst = assert_same(job, cli)
    assert "255 images: 252 classified, 3 failed" in run.stdout
    print(f"\nlocal-cluster[2,1,2048], packed environment: 255 rows equal `vit classify --json` (largest |prob "
          f"difference| {worst:.2g}) in {elapsed:.0f} s")


def test_local_cluster_embeddings_equal_vit_embed(packed, inputs, tmp_path):
    import numpy as np
    import pyarrow.parquet as pq

    paths, bad = inputs
    files = [str(p) for p in sorted(PHOTOS.glob("*.JPEG"))[:24]] + [str(bad / "broken file.jpg")]
    out = tmp_path / "out"
    _, elapsed = submit(packed, "--embed", "--format", "parquet", "--out", out, *files, expect=1)
    rows = {r["file"]: r for r in pq.read_table(out).to_pylist()}
    assert sorted(rows) == sorted(files)
    assert rows[files[-1]]["embedding"] is None and rows[files[-1]]["error"]
    emb = tmp_path / "emb.safetensors"
    cli = subprocess.run([VIT_BINARY, "embed", "--model", str(DEIT), "-o", str(emb), *files], capture_output=True, text=True)
    assert cli.returncode == 1, cli.stderr
    data = emb.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    want = np.frombuffer(data[8 + n:], dtype="<f4").reshape(header["embeddings"]["shape"])
    got = np.array([rows[f]["embedding"] for f in files[:-1]], dtype=np.float32)
    np.testing.assert_allclose(got, want, atol=1e-5)
    print(f"\nlocal-cluster[2,1,2048]: 24 embeddings equal `vit embed`'s, the broken file an error row, in {elapsed:.0f} s")
