"""Python's exception types for the caller's mistakes, as the docstrings promise: TypeError for an argument of
the wrong type, ValueError for a value out of range or not suiting the model (never vit.Error, which is for
a model, config or labels file that cannot be used), and video sampling refused as the CLI refuses it. The
messages speak Python: an encoded image passed as a path points to the _encoded calls, options are named by
their keyword arguments (not the CLI's flags), a closed Batcher says it is closed."""
import io

import numpy as np
import pytest

import vit
from test_logits import KINDS, text_embeddings, timm_naflex
from test_vit import tiny_vit, write_clip, write_safetensors


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {kind: KINDS[kind][0](root / kind) for kind in ("classifier", "dinov2", "siglip", "openclip")}


def value_error(match, call, *args, **kwargs):
    with pytest.raises(ValueError, match=match) as e:
        call(*args, **kwargs)
    assert not isinstance(e.value, vit.Error), e.value
    return e.value


def test_pool_of_the_wrong_type_is_a_type_error(models):
    for pool in (5, b"cls", ["cls"]):
        with pytest.raises(TypeError, match=r"pool must be a str \('cls', 'token', 'mean', 'avg' or 'map'\) or None, got"):
            vit.Classifier(models["classifier"], pool=pool)
    value_error("pool 'max' is not one of 'cls', 'token', 'mean', 'avg', 'map'", vit.Classifier, models["classifier"],
                pool="max")


def test_timms_pool_words_are_the_clis(models, tmp_path):
    """'token' is 'cls' and 'avg' is 'mean' (timm's global_pool words beside the CLI's)."""
    c = vit.Classifier(models["classifier"], threads=1)
    x = np.stack([c.preprocess(p) for p in write_clip_frames(tmp_path)])
    for a, b in (("token", "cls"), ("avg", "mean")):
        ea = vit.Classifier(models["classifier"], threads=1, pool=a).logits(x)
        eb = vit.Classifier(models["classifier"], threads=1, pool=b).logits(x)
        np.testing.assert_array_equal(ea, eb)
    assert vit.Classifier(models["classifier"], pool="avg").config["pool"] == "avg"


def write_clip_frames(tmp_path):
    from PIL import Image
    rng = np.random.default_rng(3)
    files = []
    for i in range(2):
        files.append(tmp_path / f"f{i}.png")
        Image.fromarray(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(files[-1])
    return files


def test_a_pool_the_model_cannot_do_is_a_value_error(models):
    value_error("attention pooling needs an attention-pool head", vit.Classifier, models["dinov2"], pool="map")
    value_error("token pooling needs a class token", vit.Classifier, models["siglip"], pool="cls")


def test_text_embeddings_not_suiting_the_model_are_a_value_error(models, tmp_path):
    text_embeddings(tmp_path / "narrow.safetensors", 3, 5)
    value_error("text embeddings of width 5, but the model's image embeddings have width 16", vit.Classifier,
                models["openclip"], text_embeddings=tmp_path / "narrow.safetensors")
    text_embeddings(tmp_path / "wide.safetensors", 3, 32)
    value_error("text embeddings label images with a CLIP or SigLIP image tower", vit.Classifier, models["dinov2"],
                text_embeddings=tmp_path / "wide.safetensors")
    value_error("labels and text embeddings both name the classes", vit.Classifier, models["openclip"],
                labels=tmp_path / "labels.txt", text_embeddings=tmp_path / "narrow.safetensors")
    # A file that cannot be used is the engine's error, as for a model or labels file.
    with pytest.raises(vit.Error, match="absent.safetensors"):
        vit.Classifier(models["openclip"], text_embeddings=tmp_path / "absent.safetensors")


def test_every_and_fps_together_are_refused_as_the_cli_refuses_them(models, tmp_path):
    c = vit.Classifier(models["classifier"], threads=1)
    tiny = (None, write_clip_frames(tmp_path))
    frames, clip = write_clip(tiny, tmp_path)
    for call in (c.embed, c.classify_video):
        arg = [clip] if call == c.embed else clip
        value_error("every and fps exclude each other", call, arg, every=3, fps=2)
        value_error("every and fps exclude each other", call, arg, every=1, fps=1.0)
        value_error("every must be 1 or more", call, arg, every=-1)
        value_error("fps must be a positive number", call, arg, fps=0)
        value_error("fps must be a positive number", call, arg, fps=float("nan"))
    assert len(c.classify_video(clip, every=1)) == 2
    assert len(c.classify_video(clip, fps=2)) == 2
    assert c.embed([clip], fps=2)["embeddings"].shape == (1, 32)


def test_batcher_options_out_of_range_are_value_errors(models):
    c = vit.Classifier(models["classifier"], threads=1)
    value_error(r"max_queue \(4\) must hold at least max_batch \(8\)", vit.Batcher, c, max_batch=8, max_queue=4)
    value_error("max_batch must be at least 1", vit.Batcher, c, max_batch=0)
    value_error("max_delay_ms must not be negative", vit.Batcher, c, max_delay_ms=-1)


def encoded_png(seed=5):
    from PIL import Image
    data = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(data, "PNG")
    return data.getvalue()


def test_an_encoded_image_given_as_a_path_points_to_the_encoded_calls(models):
    """A file's bytes read into memory and put where paths go are no path: the error says which call takes them,
    never "cannot open" under a name made of the image's bytes."""
    c = vit.Classifier(models["classifier"], threads=1)
    png = encoded_png()
    for call, encoded in ((c.classify, "classify_encoded"), (c.embed, "embed_encoded")):
        e = value_error(r"paths\[1\]: the bytes of an encoded image file, not a path: pass encoded images as \(name, "
                        r"bytes\) pairs to " + encoded + r"\(\[\(name, data\)\]\)", call, ["a.png", png])
        assert "cannot open" not in str(e)
        value_error(r"paths\[0\]: bytes with a NUL byte are no path \(an image file's bytes go to " + encoded, call,
                    [b"a\0b"])
    with pytest.raises(TypeError, match=r"paths\[0\] must be a str, bytes or os.PathLike, got bytearray"):
        c.classify([bytearray(b"a.png")])
    value_error("the bytes of an encoded image file, not a path", c.classify, [bytearray(png)])
    # The same bytes where they belong, and a path given as bytes, still work.
    assert "top" in c.classify_encoded([("a.png", png)])[0]
    assert "error" in c.classify([b"/nonexistent/a.png"])[0]


def test_errors_name_keyword_arguments_not_the_clis_flags(models, tmp_path, monkeypatch):
    """What the engine says of an option names the keyword argument that sets it (img_size, max_patches,
    max_pixels), in exceptions and in an image's error alike; a file whose name looks like a flag keeps it."""
    naflex = timm_naflex(tmp_path / "naflex")
    for e in (value_error("img_size does not apply to naflexvit_base_patch16_siglip, a NaFlex model", vit.Classifier,
                          naflex, img_size=64),
              value_error("^max_patches applies to NaFlex models", vit.Classifier, models["classifier"], max_patches=12)):
        assert "--" not in str(e), e
    small = vit.Classifier(models["classifier"], threads=1, max_pixels=100)
    (big,) = small.classify([np.zeros((20, 20, 3), np.uint8)])
    assert "(max_pixels)" in big["error"] and "--" not in big["error"], big
    monkeypatch.chdir(tmp_path)
    for name in ("--img-size.safetensors", "--max-patches/model.safetensors"):
        with pytest.raises(vit.Error) as missing:
            vit.Classifier(name)
        assert str(missing.value).startswith(name), missing.value


def test_a_batcher_says_whether_it_is_full_or_closed(models):
    c = vit.Classifier(models["classifier"], threads=1, batch=2)
    b = vit.Batcher(c, max_batch=2, max_queue=2)
    png = encoded_png()
    with pytest.raises(RuntimeError, match=r"^Batcher.classify_encoded: the queue is full \(max_queue images waiting\)") as full:
        b.classify_encoded([("a.png", png)] * 3)
    assert "closed" not in str(full.value)
    assert "top" in b.classify_encoded([("a.png", png)])[0]
    b.close()
    pixels = np.zeros((8, 8, 3), np.uint8)
    for what, call in (("Batcher.classify_encoded", lambda: b.classify_encoded([("a.png", png)])),
                       ("Batcher.classify", lambda: b.classify([pixels])),
                       ("Batcher.embed", lambda: b.embed([pixels]))):
        with pytest.raises(RuntimeError, match="^" + what + r": the Batcher is closed \(close\(\) was called\): it takes "
                                               "no new calls$") as closed:
            call()
        assert "full" not in str(closed.value)


def test_a_checkpoint_without_its_config_needs_arch(tmp_path):
    """What the tensors cannot say comes from a config or arch=, else vit.Error names it; arch= of the wrong type
    is a TypeError, an empty one a ValueError, one its tensors contradict vit.Error naming both shapes."""
    tensors, _ = tiny_vit(D=192, depth=1, heads=3, mlp=768, patch=16, img=224, classes=1000)
    write_safetensors(tmp_path / "model.safetensors", tensors)
    with pytest.raises(vit.Error, match=r"no config.json: the number of heads, .* name the architecture \(arch, e.g. arch vit_base_patch16_224"):
        vit.Classifier(tmp_path)
    c = vit.Classifier(tmp_path, arch="vit_tiny_patch16_224", threads=1)
    assert (c.config["arch"], c.config["heads"], c.config["mean"], c.classes) == (
        "vit_tiny_patch16_224", 3, (0.5, 0.5, 0.5), 1000)
    with pytest.raises(TypeError, match="arch must be a str or None, got int"):
        vit.Classifier(tmp_path, arch=5)
    value_error("arch '' names no architecture", vit.Classifier, tmp_path, arch="")
    with pytest.raises(vit.Error, match="timm's vit_small_patch16_224 is width 384, .*; .* is width 192"):
        vit.Classifier(tmp_path, arch="vit_small_patch16_224")
    with pytest.raises(vit.Error, match=r"ViT with post-norm residual blocks checkpoint: not supported yet"):
        vit.Classifier(tmp_path, arch="vit_base_patch16_rpn_224")
