"""Images in memory: PIL images of every common mode and numpy uint8 arrays (contiguous, strided, read-only,
stacked) classify and embed exactly as img.convert("RGB") saved as an 8-bit PNG does (16-bit grey I;16 as a
16-bit grey PNG file: the high byte); the Batcher takes them too, from several threads; every wrong input is
a clear exception, and an image PIL cannot read fails alone."""
import threading

import numpy as np
import pytest
from PIL import Image

import vit
from test_vit import tiny, tiny_classifier, tiny_vit, write_safetensors  # noqa: F401 (fixtures)


def photo(seed, w=45, h=37):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def as_png(img, path):
    """What the result must equal: the image as an 8-bit RGB PNG file."""
    img.convert("RGB").save(path)
    return str(path)


def same(got, want):
    """Two classify() results for the same pixels: the same classes and the very same probabilities."""
    assert "top" in got and "top" in want, (got, want)
    assert got["top"] == want["top"]


def test_pil_images_of_every_mode_classify_as_their_rgb_png(tiny_classifier, tmp_path):
    rgb = Image.fromarray(photo(1))
    modes = {
        "RGB": rgb,
        "RGBA": Image.fromarray(np.dstack([photo(1), photo(2)[..., 0]])),
        "L": rgb.convert("L"),
        "LA": rgb.convert("LA"),
        "P": rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=17),
        "CMYK": rgb.convert("CMYK"),
        "1": rgb.convert("1"),
        "YCbCr": rgb.convert("YCbCr"),
    }
    images = list(modes.values())
    got = tiny_classifier.classify(images, topk=5)
    for (mode, img), r in zip(modes.items(), got):
        assert img.mode == mode
        want = tiny_classifier.classify([as_png(img, tmp_path / f"{mode}.png")], topk=5)[0]
        same(r, want)
    assert [r["file"] for r in got] == [f"<image {i}>" for i in range(len(modes))]
    emb = tiny_classifier.embed(images)
    pngs = [as_png(img, tmp_path / f"e{i}.png") for i, img in enumerate(images)]
    np.testing.assert_array_equal(emb["embeddings"], tiny_classifier.embed(pngs)["embeddings"])


def test_16_bit_grey_keeps_the_high_byte_as_the_engine_reads_16_bit_files(tiny_classifier, tmp_path):
    values = np.random.default_rng(4).integers(0, 65536, (37, 45), dtype=np.uint16)
    img = Image.frombytes("I;16", (45, 37), values.astype("<u2").tobytes())
    big = Image.frombytes("I;16B", (45, 37), values.astype(">u2").tobytes())
    file16 = tmp_path / "grey16.png"
    img.save(file16)  # a 16-bit grey PNG
    high = Image.fromarray((values >> 8).astype(np.uint8), "L")
    got = tiny_classifier.classify([img, big], topk=5)
    same(got[0], tiny_classifier.classify([str(file16)], topk=5)[0])
    same(got[0], tiny_classifier.classify([as_png(high, tmp_path / "high.png")], topk=5)[0])
    same(got[1], got[0])
    # Not PIL's convert("RGB"), which clips at 255: documented in docs/PYTHON.md.
    clipped = tiny_classifier.classify([as_png(img, tmp_path / "clipped.png")], topk=5)[0]
    assert clipped["top"] != got[0]["top"]


def test_a_pil_image_is_named_by_its_filename(tiny_classifier, tmp_path):
    path = tmp_path / "named.png"
    Image.fromarray(photo(5)).save(path)
    opened = Image.open(path)
    (r,) = tiny_classifier.classify([opened])
    assert r["file"] == str(path)
    same(r, tiny_classifier.classify([str(path)])[0])
    assert tiny_classifier.classify([opened.convert("RGB")])[0]["file"] == "<image 0>"


def test_numpy_arrays_contiguous_strided_read_only_and_stacked(tiny_classifier, tmp_path):
    a = photo(6)
    want = tiny_classifier.classify([as_png(Image.fromarray(a), tmp_path / "a.png")], topk=5)[0]
    wide = np.zeros((37, 90, 3), np.uint8)
    wide[:, ::2] = a
    strided = wide[:, ::2]  # every other column: not contiguous
    assert not strided.flags["C_CONTIGUOUS"]
    fortran = np.asfortranarray(a)
    read_only = a.copy()
    read_only.setflags(write=False)
    b = photo(7)
    stack = np.stack([a, b])
    got = tiny_classifier.classify([a, strided, fortran, read_only, stack], topk=5)
    assert [r["file"] for r in got] == ["<array 0>", "<array 1>", "<array 2>", "<array 3>", "<array 4[0]>",
                                        "<array 4[1]>"]
    for r in got[:5]:
        same(r, want)
    same(got[5], tiny_classifier.classify([as_png(Image.fromarray(b), tmp_path / "b.png")], topk=5)[0])
    # A whole [N, H, W, 3] array in place of the list: one image per row.
    assert [r["top"] for r in tiny_classifier.classify(stack, topk=5)] == [got[4]["top"], got[5]["top"]]


def test_paths_and_images_mixed_keep_their_order(tiny, tiny_classifier, tmp_path):
    _, good, broken = tiny
    a = photo(8)
    items = [str(good[0]), a, str(broken), Image.fromarray(a), good[1]]
    got = tiny_classifier.classify(items, topk=3)
    assert [r["file"] for r in got] == [str(good[0]), "<array 1>", str(broken), "<image 3>", str(good[1])]
    same(got[0], tiny_classifier.classify([str(good[0])], topk=3)[0])
    same(got[1], got[3])
    assert "error" in got[2]
    emb = tiny_classifier.embed(items)
    assert emb["files"] == [str(good[0]), "<array 1>", "<image 3>", str(good[1])]
    assert [e["index"] for e in emb["errors"]] == [2]
    np.testing.assert_array_equal(emb["embeddings"][1], emb["embeddings"][2])


def test_an_image_that_cannot_be_used_fails_alone(tiny_classifier, tmp_path):
    path = tmp_path / "truncated.png"
    Image.fromarray(photo(9, 300, 200)).save(path)
    path.write_bytes(path.read_bytes()[:2000])
    truncated = Image.open(path)  # lazily: the pixels are read when the engine asks for them
    empty = np.zeros((0, 10, 3), np.uint8)
    got = tiny_classifier.classify([photo(10), truncated, empty, photo(10)], topk=3)
    assert got[1]["file"] == str(path) and "error" in got[1] and "OSError" in got[1]["error"]
    assert got[2]["file"] == "<array 2>" and "no pixels" in got[2]["error"]
    same(got[0], got[3])
    small = vit.Classifier(tiny_classifier.config["file"], threads=1, max_pixels=1000)
    (big,) = small.classify([photo(11, 50, 50)])
    assert "2500" in big["error"], big


def test_wrong_inputs_are_clear_exceptions(tiny_classifier):
    c = tiny_classifier
    cases = [
        ([photo(1).astype(np.float32)], ValueError, r"paths\[0\] must be a PIL.Image.Image or a numpy uint8 array "
                                                    r"\[H, W, 3\] RGB .*got dtype float32 \(floats: scale"),
        ([photo(1)[..., 0]], ValueError, r"got shape \[37, 45\] \(grey: numpy.stack"),
        ([np.zeros((5, 5, 4), np.uint8)], ValueError, r"got shape \[5, 5, 4\]"),
        ([np.zeros((2, 2, 5, 5, 3), np.uint8)], ValueError, r"got shape \[2, 2, 5, 5, 3\]"),
        ([photo(1).astype(np.uint16)], ValueError, "got dtype uint16"),
        ([photo(1) > 5], ValueError, "got dtype bool"),
        ([Image.new("I", (4, 4))], ValueError, r"paths\[0\]: a PIL image of mode I \(32-bit integers\)"),
        ([Image.new("F", (4, 4))], ValueError, "mode F"),
        ([3.5], TypeError, r"paths\[0\] must be a str, bytes or os.PathLike, got float \(or an image in memory"),
        ([[1, 2, 3]], TypeError, "got list"),
    ]
    for args, kind, message in cases:
        for call in (c.classify, c.embed):
            with pytest.raises(kind, match=message):
                call(args)


def test_the_batcher_takes_images_in_memory_from_several_threads(tiny, tiny_classifier, tmp_path):
    _, good, broken = tiny
    c = vit.Classifier(tiny_classifier.config["file"], threads=1, batch=8)
    b = vit.Batcher(c, max_batch=8, max_delay_ms=5)
    arrays = [photo(20 + i) for i in range(6)]
    items = [(good[0].name, good[0].read_bytes()), arrays[0], Image.fromarray(arrays[1]), ("junk", broken.read_bytes()),
             np.stack(arrays[2:4])]
    alone = c.classify([good[0]] + arrays[:2] + [broken] + arrays[2:4], topk=5)
    got = b.classify(items, topk=5)
    assert [r["file"] for r in got] == [good[0].name, "<array 1>", "<image 2>", "junk", "<array 4[0]>", "<array 4[1]>"]
    for g, a in zip(got, alone):
        assert ("error" in g) == ("error" in a)
        if "top" in a:
            assert [t["index"] for t in g["top"]] == [t["index"] for t in a["top"]]
            assert [t["prob"] for t in g["top"]] == pytest.approx([t["prob"] for t in a["top"]], abs=1e-6)
    want = c.embed(arrays, normalize=True)["embeddings"]
    answers, errors = {}, []

    def client(k):
        try:
            for _ in range(3):
                answers.setdefault(k, []).append(b.embed([arrays[k], Image.fromarray(arrays[k])], normalize=True))
        except Exception as e:  # pragma: no cover - shown by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for k, got in answers.items():
        for e in got:
            assert e["files"] == ["<array 0>", "<image 1>"] and e["errors"] == []
            np.testing.assert_allclose(e["embeddings"], want[[k, k]], atol=1e-6)
    head = b.embed([arrays[0]], head=True, tokens=True)
    assert head["embeddings"].shape == (1, 10) and head["tokens"].shape == (1, 17, 32)
    assert b.embed([])["embeddings"].shape == (0, 32)
    with pytest.raises(TypeError, match=r"Batcher.embed: images\[0\] must be a \(name, bytes\) pair, a PIL.Image.Image"):
        b.embed(["a path"])
    b.close()
    with pytest.raises(RuntimeError, match=r"Batcher.classify: the Batcher is closed \(close\(\) was called\)"):
        b.classify(arrays[:1])
