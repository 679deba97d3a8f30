"""The Spark job on a local master of 2 workers (CTest label spark): its rows for the 250 sample photos and
a few broken files equal `vit classify --json` on the same inputs (top-5 indices identical, probabilities
within 1e-5, one error row per broken file), as JSON lines from local paths and as Parquet from file: URIs;
the embeddings of --embed equal `vit embed`'s; and its usage errors. Run by the .venv Python that scripts/setup.sh makes (PySpark, pyarrow)."""
import json
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(os.environ.get("VIT_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[1]))
SHARED = pathlib.Path(os.environ.get("VIT_SHARED_DATA", REPO.parent / "shared" / "data"))
VIT_BINARY = os.environ.get("VIT_BINARY", str(REPO / "build" / "vit"))
DEIT = SHARED / "models" / "deit_tiny_patch16_224.fb_in1k"
PHOTOS = SHARED / "images" / "imagenet-samples"
JOB = REPO / "scripts" / "spark-classify.sh"


def require(condition, what):
    """Skips when something the test needs is missing, except under CI=true, where that is a failure."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {what}")
    pytest.skip(f"{what}; skipping")


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


def test_json_rows_equal_the_cli(inputs, tmp_path):
    paths, bad = inputs
    out = tmp_path / "out"
    run = run_job("--out", out, *paths, expect=1)  # 1: some images failed, their rows say why
    job = {}
    for part in sorted(out.glob("part-*.json")):
        for line in part.read_text().splitlines():
            row = json.loads(line)
            assert row["file"] not in job, f"two rows for {row['file']}"
            job[row["file"]] = row
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
    ]
    for args, message in cases:
        run = run_job(*args, expect=2)
        assert message in run.stderr, (args, run.stderr)
        assert not (tmp_path / "o").exists()
