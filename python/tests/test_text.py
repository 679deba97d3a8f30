"""Classifier.embed_text: a CLIP model's texts through its text tower, as open_clip's encode_text gives them (a
random-weight open_clip.CLIP made here, its tokenizer's vocabulary copied from open_clip's package); bad arguments
raise TypeError or ValueError naming the item, a model without a text tower vit.Error."""
import json
import shutil

import numpy as np
import pytest

import vit
from test_vit import tiny_vit, write_safetensors

open_clip = pytest.importorskip("open_clip")
torch = pytest.importorskip("torch")

TEXTS = ["a photo of a dog", "café crème", "猫と犬 🐶", "tench " * 100, "&amp; “quoted” ﬁne ＬＯＵＤ"]


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """(folder, open_clip's model): a shrunk open_clip.CLIP with random weights, written as an OpenCLIP folder."""
    from safetensors.torch import save_file
    torch.manual_seed(5)
    cfg = {"embed_dim": 24, "quick_gelu": False,
           "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
           "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}}
    model = open_clip.CLIP(**cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.1 * torch.randn(p.shape))
    folder = tmp_path_factory.mktemp("clip")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "open_clip_model.safetensors"))
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": cfg}))
    shutil.copy(open_clip.tokenizer.default_bpe(), folder)
    return folder, model


def test_embed_text_is_encode_text(clip):
    folder, model = clip
    c = vit.Classifier(str(folder), threads=1)
    got = c.embed_text(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 24)
    with torch.no_grad():
        want = model.encode_text(open_clip.tokenizer.SimpleTokenizer()(TEXTS)).numpy()
    diff = float(np.abs(got - want).max())
    print(f"embed_text against open_clip's encode_text: max |difference| {diff:.2e}")
    assert diff < 1e-5
    unit = c.embed_text(TEXTS, normalize=True)
    np.testing.assert_allclose(unit, want / np.linalg.norm(want, axis=1, keepdims=True), atol=1e-5)
    assert c.embed_text([]).shape == (0, 24)
    assert c.embed_text(iter(["a dog"])).shape == (1, 24)


def test_bad_texts_are_named(clip):
    c = vit.Classifier(str(clip[0]), threads=1)
    with pytest.raises(TypeError, match=r"texts must be a list, got str \(for one file"):
        c.embed_text("a dog")
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got bytes"):
        c.embed_text(["a dog", b"a cat"])
    with pytest.raises(ValueError, match=r"texts\[1\]: empty"):
        c.embed_text(["a dog", ""])
    with pytest.raises(ValueError, match=r"texts\[0\]: holds a NUL byte"):
        c.embed_text(["a\0dog"])
    with pytest.raises(ValueError, match=r"texts\[2\] cannot be UTF-8"):
        c.embed_text(["a", "b", "\udcff"])
    with pytest.raises(TypeError):
        c.embed_text(["a dog"], True)  # normalize is keyword-only
    assert c.embed_text(["a dog"]).shape == (1, 24)  # still usable


def test_a_model_without_a_text_tower_says_so(tmp_path):
    tensors, config = tiny_vit()
    write_safetensors(tmp_path / "model.safetensors", tensors)
    (tmp_path / "config.json").write_text(json.dumps(config))
    c = vit.Classifier(str(tmp_path), threads=1)
    with pytest.raises(vit.Error, match="has no text tower"):
        c.embed_text(["a dog"])
