"""The `vit` Python module: the same logits and top-5 as the `vit` command on the 250 sample photos, one
Classifier shared by two threads with the GIL released, Ctrl-C within a batch, and a clear exception for
each bad argument.
CTest (label python) runs it with PYTHONPATH at the module just built and VIT_BINARY naming `vit`."""
import json
import os
import pathlib
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import vit

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests"))
from shared_data import DEIT, PHOTOS, REPO, VIT_BINARY, require_shared_data  # noqa: E402


# ---- a tiny random model and images written at test time, so most tests need nothing from ../shared


def write_safetensors(path, tensors, metadata=None):
    """safetensors: u64 little-endian header length, the JSON header, then the raw little-endian data."""
    header, offset = ({"__metadata__": metadata} if metadata else {}), 0
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def read_safetensors(path):
    """The tensors (F32 only, as `vit classify --save-logits` writes) and the __metadata__ of a file."""
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", (name, t["dtype"])
        begin, end = t["data_offsets"]
        tensors[name] = np.frombuffer(data[8 + n + begin : 8 + n + end], dtype="<f4").reshape(t["shape"])
    return tensors, metadata


def tiny_vit(D=32, depth=2, heads=2, mlp=64, patch=8, img=32, classes=10, seed=1):
    """A ViT in timm's names (as tests/model_files.cpp writes them) and its timm config.json."""
    rng = np.random.default_rng(seed)
    t = {}

    def add(name, shape, scale, offset=0.0):
        t[name] = (offset + scale * rng.standard_normal(shape)).astype(np.float32)

    add("patch_embed.proj.weight", (D, 3, patch, patch), 0.05)
    add("patch_embed.proj.bias", (D,), 0.1)
    add("cls_token", (1, 1, D), 0.5)
    add("pos_embed", (1, (img // patch) ** 2 + 1, D), 0.5)
    for i in range(depth):
        p = f"blocks.{i}."
        add(p + "norm1.weight", (D,), 0.2, 1.0)
        add(p + "norm1.bias", (D,), 0.2)
        add(p + "attn.qkv.weight", (3 * D, D), 0.3)
        add(p + "attn.qkv.bias", (3 * D,), 0.1)
        add(p + "attn.proj.weight", (D, D), 0.15)
        add(p + "attn.proj.bias", (D,), 0.1)
        add(p + "norm2.weight", (D,), 0.2, 1.0)
        add(p + "norm2.bias", (D,), 0.2)
        add(p + "mlp.fc1.weight", (mlp, D), 0.15)
        add(p + "mlp.fc1.bias", (mlp,), 0.1)
        add(p + "mlp.fc2.weight", (D, mlp), 0.1)
        add(p + "mlp.fc2.bias", (D,), 0.1)
    add("norm.weight", (D,), 0.2, 1.0)
    add("norm.bias", (D,), 0.2)
    add("head.weight", (classes, D), 0.2)
    add("head.bias", (classes,), 0.1)
    config = {
        "architecture": "vit_custom",
        "num_classes": classes,
        "global_pool": "token",
        "model_args": {"num_heads": heads},
        "pretrained_cfg": {
            "input_size": [3, img, img],
            "interpolation": "bicubic",
            "crop_pct": 0.9,
            "crop_mode": "center",
            "mean": [0.485, 0.456, 0.406],
            "std": [0.229, 0.224, 0.225],
        },
    }
    return t, config


def ppm(width, height, seed):
    """A binary PPM (P6) of random pixels: an image format the engine reads, written without a library."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return b"P6\n%d %d\n255\n" % (width, height) + pixels.tobytes()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(model folder, [three good images], a broken image) in a temporary folder."""
    root = tmp_path_factory.mktemp("tiny")
    tensors, config = tiny_vit()
    write_safetensors(root / "model.safetensors", tensors)
    (root / "config.json").write_text(json.dumps(config))
    good = []
    for i, (w, h) in enumerate([(40, 30), (33, 50), (64, 64)]):
        good.append(root / f"good{i}.ppm")
        good[-1].write_bytes(ppm(w, h, seed=i))
    broken = root / "broken.jpg"
    broken.write_bytes(b"named like a JPEG, but text")
    return root, good, broken


@pytest.fixture(scope="module")
def tiny_classifier(tiny):
    return vit.Classifier(str(tiny[0]), threads=1, batch=4)


# ---- the module itself


def test_the_module_under_test_is_the_one_just_built():
    module_dir = os.environ.get("VIT_MODULE_DIR")
    if module_dir is None:
        pytest.skip("VIT_MODULE_DIR not set (run through CTest to check which module is imported)")
    assert pathlib.Path(vit.__file__).parent == pathlib.Path(module_dir), vit.__file__
    assert pathlib.Path(vit._vit.__file__).parent == pathlib.Path(module_dir), vit._vit.__file__
    assert issubclass(vit.Error, RuntimeError)
    assert vit.Classifier.__module__ == vit.Batcher.__module__ == vit.Error.__module__ == "vit"


def test_missing_model_raises_with_the_path():
    with pytest.raises(vit.Error, match="missing"):
        vit.Classifier("missing")
    with pytest.raises(vit.Error, match="/no/such/folder"):
        vit.Classifier(pathlib.Path("/no/such/folder"))


def test_config_labels_and_classes(tiny, tiny_classifier):
    c = tiny_classifier
    assert c.classes == 10
    assert c.labels == [f"class_{i}" for i in range(10)]
    cfg = c.config
    assert cfg["file"] == str(tiny[0] / "model.safetensors")
    assert (cfg["patch"], cfg["width"], cfg["depth"], cfg["heads"], cfg["mlp"]) == (8, 32, 2, 2, 64)
    assert cfg["input_size"] == (3, 32, 32)
    assert cfg["tokens"] == 17 and cfg["pool"] == "token" and cfg["precision"] == "f32"
    assert (cfg["interpolation"], cfg["crop_pct"], cfg["resize"]) == ("bicubic", pytest.approx(0.9), 35)


def test_a_broken_image_gets_its_error_and_the_rest_are_classified(tiny, tiny_classifier):
    _, good, broken = tiny
    files = [str(good[0]), str(broken), str(good[1]), str(tiny[0] / "absent.png"), str(good[2])]
    results = tiny_classifier.classify(files, topk=3)
    assert [r["file"] for r in results] == files
    assert results[1] == {"file": str(broken), "error": "not a supported image (JPEG, PNG, BMP, GIF, TGA, PNM, WebP, TIFF, JPEG 2000)"}
    assert set(results[3]) == {"file", "error"} and "No such file" in results[3]["error"]
    for r, path in zip([results[0], results[2], results[4]], good):
        assert set(r) == {"file", "top"} and len(r["top"]) == 3
        # The same answer as the image alone (a batch of one; the last bits may differ with the batch).
        alone = tiny_classifier.classify([str(path)], topk=3)[0]["top"]
        assert [t["index"] for t in r["top"]] == [t["index"] for t in alone]
        assert [t["prob"] for t in r["top"]] == pytest.approx([t["prob"] for t in alone], abs=1e-6)


def test_encoded_bytes_classify_as_the_files_do(tiny, tiny_classifier):
    _, good, broken = tiny
    from_files = tiny_classifier.classify([str(p) for p in good], topk=5)
    images = [("a", good[0].read_bytes()), ("b", bytearray(good[1].read_bytes())), ("c", good[2].read_bytes()),
              ("junk", broken.read_bytes()), ("empty", b"")]
    results = tiny_classifier.classify_encoded(images, topk=5)
    assert [r["file"] for r in results] == ["a", "b", "c", "junk", "empty"]
    for r, f in zip(results[:3], from_files):
        assert r["top"] == f["top"]
    assert "error" in results[3] and "error" in results[4]


def test_embed_equals_vit_embed(tiny, tiny_classifier, tmp_path):
    _, good, broken = tiny
    files = [str(good[0]), str(broken), str(good[1]), str(good[2])]
    for flags, kwargs in [([], {}), (["--head", "--tokens"], {"head": True, "tokens": True}),
                          (["--normalize"], {"normalize": True})]:
        out = tmp_path / "emb.safetensors"
        run = subprocess.run([VIT_BINARY, "embed", "--model", str(tiny[0]), "-b", "4", "-o", str(out), *flags, *files],
                             capture_output=True, text=True)
        assert run.returncode == 1, run.stderr  # the broken image: an error, left out of the file
        want, meta = read_safetensors(out)
        got = tiny_classifier.embed(files, **kwargs)
        assert got["files"] == json.loads(meta["files"]) == [files[0], files[2], files[3]]
        assert [(e["index"], e["file"]) for e in got["errors"]] == [(1, str(broken))]
        assert got["embeddings"].dtype == np.float32
        np.testing.assert_array_equal(got["embeddings"], want["embeddings"])
        if kwargs.get("tokens"):
            np.testing.assert_array_equal(got["tokens"], want["tokens"])
            assert got["embeddings"].shape == (3, 10)  # --head: the logits of the 10 classes
        if kwargs.get("normalize"):
            np.testing.assert_allclose(np.linalg.norm(got["embeddings"], axis=1), 1.0, rtol=1e-6)
    encoded = tiny_classifier.embed_encoded([(f, pathlib.Path(f).read_bytes()) for f in files])
    np.testing.assert_array_equal(encoded["embeddings"], tiny_classifier.embed(files)["embeddings"])


def test_pool_overrides_the_models_own(tiny, tmp_path):
    """pool='mean' pools the final-normed patch tokens by their mean, as `vit embed --pool mean` does."""
    _, good, _ = tiny
    files = [str(g) for g in good]
    c = vit.Classifier(tiny[0], pool="mean")
    got = c.embed(files, tokens=True)
    np.testing.assert_allclose(got["embeddings"], got["tokens"][:, 1:].mean(axis=1), rtol=1e-5, atol=1e-6)
    out = tmp_path / "emb.safetensors"
    run = subprocess.run([VIT_BINARY, "embed", "--model", str(tiny[0]), "--pool", "mean", "-o", str(out), *files],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(got["embeddings"], read_safetensors(out)[0]["embeddings"])
    with pytest.raises(ValueError, match="pool 'max'"):
        vit.Classifier(tiny[0], pool="max")
    with pytest.raises(ValueError, match="attention"):  # a pool the model cannot do: the caller's choice
        vit.Classifier(tiny[0], pool="map").embed(files)


def write_clip(tiny, tmp_path):
    """The three images resized to one size as PNG frames, and a lossless clip of them at 2 frames/s
    (tests/write_clip)."""
    from PIL import Image
    frames = []
    for i, p in enumerate(tiny[1]):
        frames.append(tmp_path / f"frame{i}.png")
        Image.open(p).convert("RGB").resize((48, 40)).save(frames[-1])
    clip = tmp_path / "clip.mkv"
    subprocess.run([os.environ.get("VIT_WRITE_CLIP", str(REPO / "build" / "tests" / "write_clip")), str(clip), "2"]
                   + [str(f) for f in frames], check=True)
    return frames, clip


def test_video_frames_classify_as_their_images(tiny, tiny_classifier, tmp_path):
    """A clip of the three images: each sampled frame classified as its image."""
    frames, clip = write_clip(tiny, tmp_path)
    results = tiny_classifier.classify_video(str(clip), every=1, topk=3)
    images = tiny_classifier.classify([str(f) for f in frames], topk=3)
    assert [(r["frame"], r["time_s"]) for r in results] == [(0, 0.0), (1, 0.5), (2, 1.0)]
    for r, i in zip(results, images):
        assert r["file"] == str(clip)
        assert [t["index"] for t in r["top"]] == [t["index"] for t in i["top"]]
        assert [t["prob"] for t in r["top"]] == pytest.approx([t["prob"] for t in i["top"]], abs=1e-6)
    assert [r["frame"] for r in tiny_classifier.classify_video(clip)] == [0, 2]  # one frame a second
    (tmp_path / "notes.mp4").write_text("not a video")
    broken = tiny_classifier.classify_video(tmp_path / "notes.mp4")
    assert broken == [{"file": str(tmp_path / "notes.mp4"), "error": broken[0]["error"]}]
    assert broken[0]["error"].startswith("cannot open as a video")
    with pytest.raises(ValueError, match="every must be 1 or more"):
        tiny_classifier.classify_video(clip, every=-1)
    with pytest.raises(ValueError, match="fps must be a positive number, got -1"):
        tiny_classifier.classify_video(clip, fps=-1)
    with pytest.raises(ValueError, match="topk must be at least 1"):
        tiny_classifier.classify_video(clip, topk=0)
    with pytest.raises(TypeError, match="must be a str, bytes or os.PathLike, got int"):
        tiny_classifier.classify_video(3)


def test_a_video_embeds_as_the_mean_of_its_frames(tiny, tiny_classifier, tmp_path):
    """embed() on a clip of the three images: the mean of their embeddings, normalized after averaging."""
    frames, clip = write_clip(tiny, tmp_path)
    (tmp_path / "notes.mp4").write_text("not a video")
    each = tiny_classifier.embed([str(f) for f in frames], tokens=True)
    got = tiny_classifier.embed([clip, tmp_path / "notes.mp4", frames[0]], tokens=True, every=1)
    assert got["files"] == [str(clip), str(frames[0])]
    assert got["errors"][0]["index"] == 1 and got["errors"][0]["error"].startswith("cannot open as a video")
    np.testing.assert_allclose(got["embeddings"][0], each["embeddings"].mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(got["tokens"][0], each["tokens"].mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(got["embeddings"][1], each["embeddings"][0], atol=1e-6)
    unit = tiny_classifier.embed([clip], normalize=True, every=1)["embeddings"][0]
    mean = each["embeddings"].mean(axis=0)
    np.testing.assert_allclose(unit, mean / np.linalg.norm(mean), atol=1e-5)
    with pytest.raises(ValueError, match="embed: every must be 1 or more"):
        tiny_classifier.embed([clip], every=-1)


def test_exif_transpose_turns_images(tiny, tmp_path):
    from PIL import Image, ImageOps
    exif = Image.Exif()
    exif[0x0112] = 6  # a quarter turn clockwise
    turned = tmp_path / "turned.png"
    Image.open(tiny[1][0]).save(turned, exif=exif.tobytes())
    upright = tmp_path / "upright.png"
    ImageOps.exif_transpose(Image.open(turned)).save(upright)
    on = vit.Classifier(str(tiny[0]), threads=1, exif_transpose=True)
    off = vit.Classifier(str(tiny[0]), threads=1)
    assert np.array_equal(on.preprocess(turned), off.preprocess(upright))
    assert not np.array_equal(off.preprocess(turned), off.preprocess(upright))


def test_logits_of_preprocess_give_classify_probabilities(tiny, tiny_classifier):
    _, good, _ = tiny
    x = np.stack([tiny_classifier.preprocess(p) for p in good])  # pathlib paths are accepted too
    assert x.shape == (3, 3, 32, 32) and x.dtype == np.float32
    logits = tiny_classifier.logits(x)
    assert logits.shape == (3, 10) and logits.dtype == np.float32
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    for row, r in zip(probs, tiny_classifier.classify([str(p) for p in good], topk=10)):
        assert [t["index"] for t in r["top"]] == list(np.argsort(-row, kind="stable"))
        assert [t["prob"] for t in r["top"]] == pytest.approx(sorted(row, reverse=True), abs=1e-6)
    assert tiny_classifier.logits(np.zeros((0, 3, 32, 32), np.float32)).shape == (0, 10)


def test_find_images_walks_folders_as_the_cli_does(tmp_path):
    for name in ("b.jpg", "A.PNG", "sub/c.bmp", "sub/d.JPEG", "notes.txt", "sub/e.webm", "sub/f.WebP", "sub/g.tif"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "folder.jpg").mkdir()
    found = vit.find_images([tmp_path, str(tmp_path / "notes.txt"), "absent.jpg"])
    root = str(tmp_path)
    assert found == [{"file": f"{root}/A.PNG"}, {"file": f"{root}/b.jpg"},
                     {"file": f"{root}/folder.jpg", "error": "is a directory, not an image"},
                     {"file": f"{root}/sub/c.bmp"}, {"file": f"{root}/sub/d.JPEG"}, {"file": f"{root}/sub/f.WebP"},
                     {"file": f"{root}/sub/g.tif"},
                     {"file": f"{root}/notes.txt"},  # named explicitly: taken whatever its name
                     {"file": "absent.jpg", "error": "no such file or directory"}]
    with_videos = [f["file"] for f in vit.find_images([tmp_path], videos=True)]
    assert f"{root}/sub/e.webm" in with_videos and len(with_videos) == 8
    with pytest.raises(TypeError, match=r"must be a list, got str"):
        vit.find_images(root)


def test_bad_arguments_raise_clearly(tiny, tiny_classifier):
    c = tiny_classifier
    x = np.zeros((2, 3, 32, 32), np.float32)
    with pytest.raises(ValueError, match=r"float32 \[B, 3, 32, 32\], got dtype float64"):
        c.logits(x.astype(np.float64))
    with pytest.raises(ValueError, match=r"got shape \[3, 32, 32\]"):
        c.logits(x[0])
    with pytest.raises(ValueError, match=r"got shape \[2, 3, 16, 16\]"):
        c.logits(np.zeros((2, 3, 16, 16), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        c.logits(x.transpose(0, 1, 3, 2))
    with pytest.raises(TypeError, match="numpy.ndarray"):
        c.logits(x.tolist())
    with pytest.raises(TypeError, match=r"must be a list, got str \(for one file, pass \[path\]\)"):
        c.classify(str(tiny[1][0]))
    with pytest.raises(TypeError, match="must be a list, got int"):
        c.classify(3)
    with pytest.raises(TypeError, match=r"paths\[1\] must be a str, bytes or os.PathLike, got int"):
        c.classify([str(tiny[1][0]), 7])
    for topk in (0, -1):
        with pytest.raises(ValueError, match=f"topk must be at least 1, got {topk}"):
            c.classify([str(tiny[1][0])], topk=topk)
        with pytest.raises(ValueError, match="topk must be at least 1"):
            c.classify_encoded([("a", b"")], topk=topk)
    with pytest.raises(TypeError, match=r"images\[0\] must be a \(name, bytes\) pair, got bytes"):
        c.classify_encoded([b"just bytes"])
    with pytest.raises(TypeError, match=r"images\[0\]: the image must be bytes or bytearray, got str"):
        c.classify_encoded([("a", "not bytes")])
    with pytest.raises(ValueError, match="precision 'f16' is not one of f32, bf16, int8"):
        vit.Classifier(str(tiny[0]), precision="f16")
    # Options out of range, or not suiting the model: ValueError, in the library's words, not the CLI's flags.
    for kwargs, message in [({"batch": 0}, "batch size 0 is out of range"),
                            ({"max_pixels": 0}, "max_pixels must be positive, got 0"),
                            ({"threads": -1}, r"threads -1 is out of range \(0 for all cores"),
                            ({"img_size": -16}, r"image size -16 is out of range \(0 for the model's own"),
                            ({"img_size": 36}, "image size 36 is not a multiple of the model's patch size 8")]:
        with pytest.raises(ValueError, match=message) as e:
            vit.Classifier(str(tiny[0]), **kwargs)
        assert "--" not in str(e.value), e.value
        assert not isinstance(e.value, vit.Error), kwargs
    with pytest.raises(vit.Error, match="labels.txt"):
        vit.Classifier(str(tiny[0]), labels=str(tiny[0] / "labels.txt"))
    with pytest.raises(TypeError):
        vit.Classifier(str(tiny[0]), "f32")  # options are keywords only
    # A keyword it does not take, or a value of the wrong type: TypeError naming it.
    with pytest.raises(TypeError, match="Classifier\\(\\) got an unexpected keyword argument 'img_sizes'"):
        vit.Classifier(str(tiny[0]), img_sizes=224)
    for kwargs, message in [({"img_size": 2.5}, "img_size must be an int, got float"),
                            ({"batch": "8"}, "batch must be an int, got str"),
                            ({"precision": 32}, "precision must be a str, got int"),
                            ({"labels": 3}, "labels must be a str, bytes or os.PathLike, got int")]:
        with pytest.raises(TypeError, match=message):
            vit.Classifier(str(tiny[0]), **kwargs)


def test_model_options_are_the_classifiers_keywords_with_its_defaults():
    """vit.model_options() lists the model-wide keywords of Classifier() with the defaults its signature gives, and
    the command line's flags for them."""
    options = vit.model_options()
    names = [o["name"] for o in options]
    assert names[:2] == ["precision", "threads"] and {"img_size", "max_patches", "arch", "labels"} <= set(names)
    signature = vit.Classifier.__init__.__doc__.splitlines()[0]
    for o in options:
        assert o["flag"] == "--" + o["name"].replace("_", "-") and len(o["help"]) > 10, o
        default = "None" if o["default"] is None else repr(o["default"])
        assert f"{o['name']}: " in signature and f"{o['name']}: {o['type'] if o['type'] == 'int' else ''}" in signature
        assert signature.split(f"{o['name']}: ", 1)[1].split(",")[0].endswith(f"= {default}"), (o, signature)
        assert (o["min"] is None) == (o["type"] != "int") and (o["choices"] is None) == (o["type"] not in ("precision", "pool")), o
    img_size = options[names.index("img_size")]
    with pytest.raises(ValueError, match=f"image size {img_size['max'] + 1} is out of range"):
        vit.Classifier("unused", img_size=img_size["max"] + 1)


def test_bytes_paths_are_taken_as_os_fsdecode_takes_them(tiny, tiny_classifier):
    model, good, _ = tiny
    by_str = tiny_classifier.classify([str(good[0])])
    by_bytes = tiny_classifier.classify([os.fsencode(good[0])])
    assert by_bytes == by_str and "top" in by_bytes[0]
    c = vit.Classifier(os.fsencode(model), threads=1)
    assert c.classify([os.fsencode(good[0])])[0]["top"] == by_str[0]["top"]
    assert vit.find_images([os.fsencode(good[0])]) == [{"file": str(good[0])}]
    np.testing.assert_array_equal(c.preprocess(os.fsencode(good[0])), c.preprocess(good[0]))


def test_the_pip_installed_command_without_a_model_says_how_to_get_one(tiny, tmp_path):
    """pip installs the engine's program as site-packages/vit/vit, with no weights/ folder and no
    weights/get_default_model.sh near it: `vit classify PHOTO` without --model names --model and where the default
    model's files are, not a script the user does not have. A source checkout still points to its script."""
    package = tmp_path / "site-packages" / "vit"
    package.mkdir(parents=True)
    program = package / "vit"
    program.write_bytes(pathlib.Path(VIT_BINARY).read_bytes())
    program.chmod(0o755)
    photo = str(tiny[1][0])
    run = subprocess.run([str(program), "classify", photo], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert run.stderr == ("error: no --model given, and this vit has no default model beside it: pass --model FOLDER, a "
                          "folder holding model.safetensors and config.json; the default is timm's "
                          "deit_tiny_patch16_224.fb_in1k, whose two files are on the Hugging Face hub: "
                          "https://huggingface.co/timm/deit_tiny_patch16_224.fb_in1k\n"), run.stderr
    checkout = tmp_path / "checkout"
    (checkout / "weights").mkdir(parents=True)
    (checkout / "weights" / "get_default_model.sh").write_text("#!/bin/sh\n")
    run = subprocess.run([str(program), "classify", photo], cwd=checkout, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert "default model not found; fetch it with weights/get_default_model.sh or pass --model" in run.stderr, run.stderr


def test_too_many_threads_warn_through_python_warnings(tiny):
    with pytest.warns(RuntimeWarning, match=r"1000 threads asked for, but this machine has \d+ cores: using"):
        c = vit.Classifier(str(tiny[0]), threads=1000)
    assert "top" in c.classify([str(tiny[1][0])])[0]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a program may make it an error
        with pytest.raises(RuntimeWarning):
            vit.Classifier(str(tiny[0]), threads=1000)


def test_properties_and_methods_are_documented_without_pybind_internals():
    for name in ("labels", "classes", "config"):
        doc = getattr(vit.Classifier, name).__doc__
        assert doc and len(doc) > 20, (name, doc)
    for f in (vit.Classifier.__init__, vit.Classifier.classify, vit.Classifier.classify_encoded,
              vit.Classifier.classify_video, vit.Classifier.logits, vit.Classifier.preprocess, vit.find_images,
              vit.Classifier.labels.fget, vit.Classifier.classes.fget):
        assert "handle" not in f.__doc__, f.__doc__
    assert ".webp" in vit.find_images.__doc__ and ".j2k" in vit.find_images.__doc__


# ---- DeiT-Tiny on the 250 sample photos, against `vit classify`


@pytest.fixture(scope="module")
def photos():
    require_shared_data()
    files = sorted(str(p) for p in PHOTOS.glob("*.JPEG"))
    assert len(files) == 250, f"expected 250 photos in {PHOTOS}, found {len(files)}"
    return files


@pytest.fixture(scope="module")
def cli(photos, tmp_path_factory):
    """`vit classify --json --save-logits` on the photos, batch 8 and 2 threads: (JSON lines, logits)."""
    out = tmp_path_factory.mktemp("cli") / "logits.safetensors"
    cmd = [VIT_BINARY, "classify", "--model", str(DEIT), "--batch", "8", "--threads", "2", "--topk", "5", "--json",
           "--save-logits", str(out)] + photos
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    tensors, metadata = read_safetensors(out)
    assert json.loads(metadata["files"]) == photos
    return [json.loads(line) for line in run.stdout.splitlines()], tensors["logits"]


@pytest.fixture(scope="module")
def deit(photos):
    return vit.Classifier(str(DEIT), threads=2, batch=8)


def test_logits_equal_the_cli_on_250_photos(photos, cli, deit):
    x = np.stack([deit.preprocess(f) for f in photos])
    logits = deit.logits(x)
    assert logits.shape == cli[1].shape == (250, 1000)
    diff = float(np.abs(logits - cli[1]).max())
    print(f"\n250 photos, batch 8: largest |logit(Python) - logit(vit classify)| = {diff:.3g}")
    assert diff <= 1e-5


def test_top5_equal_the_cli_json(photos, cli, deit):
    results = deit.classify(photos, topk=5)
    assert results == cli[0]  # file, index, label and probability (the same float) of every entry
    print(f"\n250 photos: classify() top-5 identical to `vit classify --json`; top-1 of the tench: "
          f"{results[0]['top'][0]['label']} {results[0]['top'][0]['prob']:.4f}")
    assert results[0]["top"][0]["label"] == "tench"


def test_two_threads_share_one_classifier_with_the_gil_released(photos, deit):
    files = photos[:32]
    t0 = time.perf_counter()
    alone = deit.classify(files, topk=5)
    one_call = time.perf_counter() - t0
    answers, calls, ticks = {0: [], 1: []}, [], []
    done = threading.Event()

    def worker(k):
        for _ in range(2):
            start = time.perf_counter()
            answers[k].append(deit.classify(files, topk=5))
            calls.append((start, time.perf_counter()))

    def ticker():  # pure Python: it can only run while no thread holds the GIL in the engine
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
    tick = threading.Thread(target=ticker)
    tick.start()
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    done.set()
    tick.join()
    assert all(a == alone for k in (0, 1) for a in answers[k])
    # A thread switch can land between taking `start` and entering the engine, so only ticks well inside
    # a call count; with the GIL held through the call there would be none at all.
    inside = [sum(s + 0.05 < t < e - 0.05 for t in ticks) for s, e in calls]
    print(f"\n2 threads x 2 calls x 32 photos in {elapsed:.2f} s (one call alone: {one_call:.2f} s), all answers "
          f"identical to one thread's; ticks of a third Python thread well inside each call: {inside}")
    assert min(inside) >= 5, inside


def test_ctrl_c_stops_a_long_classify_within_a_batch_and_the_classifier_stays_usable(photos):
    c = vit.Classifier(str(DEIT), threads=1, batch=8)
    before = c.classify(photos[:8], topk=5)
    t0 = time.perf_counter()
    c.classify(photos[8:16], topk=5)
    one_batch = time.perf_counter() - t0
    files = photos * 8  # 250 batches: minutes on one thread
    sent = []

    def interrupt():
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(1.0, interrupt)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        c.classify(files, topk=5)
    latency = time.perf_counter() - sent[0]
    timer.join()
    print(f"\nSIGINT 1 s into classify() of {len(files)} photos (threads=1, batch 8; one batch {one_batch:.2f} s, "
          f"the whole call ~{one_batch * len(files) / 8:.0f} s): KeyboardInterrupt after {latency:.2f} s")
    # Within a few batches (the one running when the signal came, and a loaded machine's slower ones), never the
    # rest of the call: one batch's time is measured once, and on a machine shared with other work the batch
    # running at the signal can take several times as long.
    assert latency < max(5.0, 5 * one_batch)
    assert c.classify(photos[:8], topk=5) == before


def test_zero_shot_labels_from_text_embeddings(tmp_path):
    """A CLIP tower (timm's names: norm_pre) labels images by its text embeddings: softmax over logit_scale times
    the cosine similarity of model(x) (the projection) with each class's embedding, as open_clip scores them
    (tests/test_layouts.cpp checks that against open_clip itself)."""
    t, config = tiny_vit(classes=8)
    rng = np.random.default_rng(5)
    t["norm_pre.weight"] = (1 + 0.2 * rng.standard_normal(32)).astype(np.float32)
    t["norm_pre.bias"] = (0.2 * rng.standard_normal(32)).astype(np.float32)
    write_safetensors(tmp_path / "model.safetensors", t)
    (tmp_path / "config.json").write_text(json.dumps(config))
    text = rng.standard_normal((3, 8)).astype(np.float32)
    labels = ["tench", "cat", "airliner"]
    write_safetensors(tmp_path / "classes.safetensors", {"text_embeddings": text},
                      {"labels": json.dumps(labels), "logit_scale": "30.0", "activation": "softmax"})
    photos = [str(tmp_path / "a.png")]
    from PIL import Image
    Image.fromarray(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)).save(photos[0])
    image = vit.Classifier(str(tmp_path)).embed(photos, head=True)["embeddings"][0]
    zs = vit.Classifier(str(tmp_path), text_embeddings=str(tmp_path / "classes.safetensors"))
    assert zs.labels == labels and zs.classes == 3
    cos = (text / np.linalg.norm(text, axis=1, keepdims=True)) @ (image / np.linalg.norm(image))
    want = np.exp(30 * cos - np.max(30 * cos))
    want /= want.sum()
    (got,) = zs.classify(photos, topk=3)
    assert [p["label"] for p in got["top"]] == [labels[i] for i in np.argsort(-want)]
    for p in got["top"]:
        assert abs(p["prob"] - want[p["index"]]) < 1e-5
    write_safetensors(tmp_path / "narrow.safetensors", {"text_embeddings": np.ones((3, 5), np.float32)},
                      {"labels": json.dumps(labels), "logit_scale": "1"})
    with pytest.raises(ValueError, match="text embeddings of width 5, but the model's image embeddings have width 8"):
        vit.Classifier(str(tmp_path), text_embeddings=str(tmp_path / "narrow.safetensors"))
