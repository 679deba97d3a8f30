"""Classifier.logits() for every kind of model, against embed() on the same images: a classifier's logits,
a CLIP tower's projection (timm, OpenCLIP and Hugging Face layouts), the pooled features of a model without a
head (DINOv2-like, a SigLIP tower), and zero-shot scores with text embeddings. Each model is written here,
small and random, in its layout's own tensor names (as tests/make_timm_models.py and
tests/make_layout_models.py would save them), so nothing from ../shared is needed."""
import json

import numpy as np
import pytest

import vit
from test_vit import read_safetensors, tiny_vit, write_safetensors

D, DEPTH, HEADS, MLP, PATCH, IMG = 32, 2, 2, 64, 8, 32
GRID = (IMG // PATCH) ** 2


def pretrained_cfg(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)):
    return {"input_size": [3, IMG, IMG], "interpolation": "bicubic", "crop_pct": 0.9, "crop_mode": "center",
            "mean": list(mean), "std": list(std)}


def timm_args(**more):
    return {"embed_dim": D, "depth": DEPTH, "num_heads": HEADS, "patch_size": PATCH, "img_size": [IMG, IMG], **more}


def write_timm(folder, tensors, config):
    folder.mkdir()
    write_safetensors(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def classifier_model(folder):
    t, config = tiny_vit(classes=10)
    return write_timm(folder, t, config)


def timm_clip(folder):
    """timm's CLIP tower (vit_*_clip_*): norm_pre, a class token, and a head of 16 (its projection)."""
    t, _ = tiny_vit(classes=16, seed=2)
    rng = np.random.default_rng(12)
    t["norm_pre.weight"] = (1 + 0.2 * rng.standard_normal(D)).astype(np.float32)
    t["norm_pre.bias"] = (0.2 * rng.standard_normal(D)).astype(np.float32)
    del t["patch_embed.proj.bias"]
    config = {"architecture": "vit_base_patch16_clip_224", "num_classes": 16, "global_pool": "token",
              "model_args": timm_args(num_classes=16, global_pool="token"),
              "pretrained_cfg": pretrained_cfg((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))}
    return write_timm(folder, t, config)


def timm_dinov2(folder):
    """DINOv2 as timm has it (vit_*_dinov2): layer scale, a class token, no head (num_classes 0)."""
    t, _ = tiny_vit(seed=3)
    del t["head.weight"], t["head.bias"]
    rng = np.random.default_rng(13)
    for i in range(DEPTH):
        for g in ("ls1", "ls2"):
            t[f"blocks.{i}.{g}.gamma"] = (0.5 + 0.2 * rng.standard_normal(D)).astype(np.float32)
    config = {"architecture": "vit_small_patch14_dinov2", "num_classes": 0, "global_pool": "token",
              "model_args": timm_args(num_classes=0, global_pool="token"), "pretrained_cfg": pretrained_cfg()}
    return write_timm(folder, t, config)


def timm_siglip(folder):
    """timm's SigLIP tower (vit_*_siglip_*): no class token, attention pooling (attn_pool), no head."""
    t, _ = tiny_vit(seed=4)
    del t["head.weight"], t["head.bias"], t["cls_token"]
    rng = np.random.default_rng(14)
    t["pos_embed"] = (0.5 * rng.standard_normal((1, GRID, D))).astype(np.float32)

    def add(name, shape, scale, offset=0.0):
        t[name] = (offset + scale * rng.standard_normal(shape)).astype(np.float32)

    add("attn_pool.latent", (1, 1, D), 0.5)
    add("attn_pool.q.weight", (D, D), 0.2)
    add("attn_pool.q.bias", (D,), 0.1)
    add("attn_pool.kv.weight", (2 * D, D), 0.2)
    add("attn_pool.kv.bias", (2 * D,), 0.1)
    add("attn_pool.proj.weight", (D, D), 0.2)
    add("attn_pool.proj.bias", (D,), 0.1)
    add("attn_pool.norm.weight", (D,), 0.2, 1.0)
    add("attn_pool.norm.bias", (D,), 0.2)
    add("attn_pool.mlp.fc1.weight", (MLP, D), 0.15)
    add("attn_pool.mlp.fc1.bias", (MLP,), 0.1)
    add("attn_pool.mlp.fc2.weight", (D, MLP), 0.1)
    add("attn_pool.mlp.fc2.bias", (D,), 0.1)
    config = {"architecture": "vit_base_patch16_siglip_224", "num_classes": 0, "global_pool": "map",
              "model_args": timm_args(num_classes=0, global_pool="map"),
              "pretrained_cfg": pretrained_cfg((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))}
    return write_timm(folder, t, config)


def transformer_blocks(rng, name):
    """Random encoder blocks, each tensor by a function of (block, timm name) -> the layout's name."""
    t = {}
    for i in range(DEPTH):
        for timm, shape, scale, offset in [("norm1.weight", (D,), 0.2, 1.0), ("norm1.bias", (D,), 0.2, 0.0),
                                           ("attn.qkv.weight", (3 * D, D), 0.3, 0.0), ("attn.qkv.bias", (3 * D,), 0.1, 0.0),
                                           ("attn.proj.weight", (D, D), 0.15, 0.0), ("attn.proj.bias", (D,), 0.1, 0.0),
                                           ("norm2.weight", (D,), 0.2, 1.0), ("norm2.bias", (D,), 0.2, 0.0),
                                           ("mlp.fc1.weight", (MLP, D), 0.15, 0.0), ("mlp.fc1.bias", (MLP,), 0.1, 0.0),
                                           ("mlp.fc2.weight", (D, MLP), 0.1, 0.0), ("mlp.fc2.bias", (D,), 0.1, 0.0)]:
            a = (offset + scale * rng.standard_normal(shape)).astype(np.float32)
            for n, part in name(i, timm, a):
                t[n] = part
    return t


def clip_tower_ends(rng, t, conv, cls, pos, norms):
    """A CLIP tower's tensors around its blocks, drawn in this order: the patch convolution, the class and
    position embeddings, then the norms before and after the blocks (`norms`: their names' prefixes)."""
    t[conv] = (0.05 * rng.standard_normal((D, 3, PATCH, PATCH))).astype(np.float32)
    t[cls] = (0.5 * rng.standard_normal(D)).astype(np.float32)
    t[pos] = (0.5 * rng.standard_normal((GRID + 1, D))).astype(np.float32)
    for n in norms:
        t[f"{n}.weight"] = (1 + 0.2 * rng.standard_normal(D)).astype(np.float32)
        t[f"{n}.bias"] = (0.2 * rng.standard_normal(D)).astype(np.float32)


def openclip(folder, E=16):
    """open_clip's VisionTransformer (visual.*) as open_clip's save_for_hf writes it, image side only."""
    rng = np.random.default_rng(21)

    def name(i, timm, a):
        p = f"visual.transformer.resblocks.{i}."
        table = {"norm1": "ln_1", "norm2": "ln_2", "attn.qkv": "attn.in_proj_", "attn.proj": "attn.out_proj",
                 "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj"}
        stem, kind = timm.rsplit(".", 1)
        if stem == "attn.qkv":
            return [(p + "attn.in_proj_" + kind, a)]
        return [(p + table[stem] + "." + kind, a)]

    t = transformer_blocks(rng, name)
    clip_tower_ends(rng, t, "visual.conv1.weight", "visual.class_embedding", "visual.positional_embedding",
                    ("visual.ln_pre", "visual.ln_post"))
    t["visual.proj"] = (0.2 * rng.standard_normal((D, E))).astype(np.float32)
    folder.mkdir()
    write_safetensors(folder / "open_clip_model.safetensors", t)
    (folder / "open_clip_config.json").write_text(json.dumps({
        "model_cfg": {"embed_dim": E, "quick_gelu": False,
                      "vision_cfg": {"image_size": IMG, "layers": DEPTH, "width": D, "head_width": D // HEADS, "mlp_ratio": MLP / D,
                                     "patch_size": PATCH}},
        "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711]}}))
    return folder


def hf_clip(folder, E=16):
    """transformers' CLIPVisionModelWithProjection: vision_model.* and visual_projection."""
    rng = np.random.default_rng(22)

    def name(i, timm, a):
        p = f"vision_model.encoder.layers.{i}."
        stem, kind = timm.rsplit(".", 1)
        if stem == "attn.qkv":
            return [(p + f"self_attn.{x}_proj.{kind}", part) for x, part in zip("qkv", np.split(a, 3))]
        table = {"norm1": "layer_norm1", "norm2": "layer_norm2", "attn.proj": "self_attn.out_proj",
                 "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2"}
        return [(p + table[stem] + "." + kind, a)]

    t = transformer_blocks(rng, name)
    e = "vision_model.embeddings."
    clip_tower_ends(rng, t, e + "patch_embedding.weight", e + "class_embedding", e + "position_embedding.weight",
                    ("vision_model.pre_layrnorm", "vision_model.post_layernorm"))
    t["visual_projection.weight"] = (0.2 * rng.standard_normal((E, D))).astype(np.float32)
    folder.mkdir()
    write_safetensors(folder / "model.safetensors", t)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["CLIPVisionModelWithProjection"], "model_type": "clip_vision_model",
        "hidden_act": "quick_gelu", "hidden_size": D, "image_size": IMG, "intermediate_size": MLP,
        "layer_norm_eps": 1e-5, "num_attention_heads": HEADS, "num_channels": 3, "num_hidden_layers": DEPTH,
        "patch_size": PATCH, "projection_dim": E}))
    return folder


# kind -> (writer, what logits() gives: "logits", "projection" or "features", its width)
KINDS = {
    "classifier": (classifier_model, "logits", 10),
    "timm_clip": (timm_clip, "projection", 16),
    "openclip": (openclip, "projection", 16),
    "hf_clip": (hf_clip, "projection", 16),
    "dinov2": (timm_dinov2, "features", D),
    "siglip": (timm_siglip, "features", D),
}


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    from PIL import Image
    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(7)
    files = []
    for i, (w, h) in enumerate([(40, 30), (33, 50), (64, 64)]):
        files.append(str(root / f"{i}.png"))
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(files[-1])
    return files


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_logits_are_model_x_for_every_kind_of_model(kind, images, tmp_path):
    write, what, width = KINDS[kind]
    c = vit.Classifier(write(tmp_path / kind), threads=1, batch=2)
    x = np.stack([c.preprocess(f) for f in images])
    logits = c.logits(x)
    assert logits.shape == (3, width) and logits.dtype == np.float32, (kind, logits.shape)
    assert np.isfinite(logits).all()
    # timm's model(x): what embed(head=True) gives for the same files (batch 2 here, 3 there).
    np.testing.assert_allclose(logits, c.embed(images, head=True)["embeddings"], rtol=1e-5, atol=1e-5)
    if what == "features":  # no head: model(x) is the pooled features, embed()'s default rows
        np.testing.assert_allclose(logits, c.embed(images)["embeddings"], rtol=1e-5, atol=1e-5)
    assert c.logits(np.zeros((0, 3, IMG, IMG), np.float32)).shape == (0, width)
    # One answer everywhere: classes, labels and config say the same; a projection has outputs, not classes.
    assert len(c.labels) == c.classes == c.config["classes"], (kind, len(c.labels), c.classes, c.config["classes"])
    assert c.config["projection"] == (width if what == "projection" else 0), (kind, c.config["projection"])
    if what == "logits":
        assert c.classes == width
    else:
        assert c.classes == 0, (kind, c.classes)
        with pytest.raises(vit.Error, match="no classifier head"):
            c.classify(images)
        assert f"embeddings of {width}" in repr(c)
        value_error_labels = tmp_path / "labels.txt"
        value_error_labels.write_text("".join(f"l{i}\n" for i in range(width)))
        with pytest.raises(ValueError, match="labels name a classifier's classes, and the model has none"):
            vit.Classifier(write(tmp_path / (kind + "_again")), labels=value_error_labels)


def text_embeddings(path, classes, width, bias=None):
    rng = np.random.default_rng(31)
    text = rng.standard_normal((classes, width)).astype(np.float32)
    meta = {"labels": json.dumps([f"thing {i}" for i in range(classes)]), "logit_scale": "20.0",
            "activation": "softmax"}
    if bias is not None:
        meta.update(logit_bias=str(bias), activation="sigmoid")
    write_safetensors(path, {"text_embeddings": text}, meta)
    return text


@pytest.mark.parametrize("kind,bias", [("openclip", None), ("hf_clip", None), ("timm_clip", None), ("siglip", -3.5)])
def test_logits_with_text_embeddings_are_the_zero_shot_scores(kind, bias, images, tmp_path):
    write, _, width = KINDS[kind]
    model = write(tmp_path / kind)
    text = text_embeddings(tmp_path / "classes.safetensors", 5, width, bias)
    image = vit.Classifier(model, threads=1).embed(images, head=True)["embeddings"]
    zs = vit.Classifier(model, threads=1, batch=2, text_embeddings=tmp_path / "classes.safetensors")
    assert zs.classes == 5 and len(zs.labels) == 5
    logits = zs.logits(np.stack([zs.preprocess(f) for f in images]))
    assert logits.shape == (3, 5) and logits.dtype == np.float32
    cos = (image / np.linalg.norm(image, axis=1, keepdims=True)) @ (text / np.linalg.norm(text, axis=1, keepdims=True)).T
    np.testing.assert_allclose(logits, 20.0 * cos + (bias or 0.0), rtol=1e-4, atol=1e-4)
    # classify() ranks the same scores.
    for row, r in zip(logits, zs.classify(images, topk=5)):
        assert [t["index"] for t in r["top"]] == list(np.argsort(-row, kind="stable"))


def timm_naflex(folder):
    """timm's SigLIP 2 NaFlex tower (naflexvit_*_siglip) in naflexvit.py's names: SigLIP's tensors with the patch
    embedding a linear layer over channels-last patches (embeds.proj) and the table [1, h, w, D] (embeds.pos_embed)."""
    timm_siglip(folder)
    t, _ = read_safetensors(folder / "model.safetensors")
    t["embeds.proj.weight"] = np.ascontiguousarray(t.pop("patch_embed.proj.weight").transpose(0, 2, 3, 1).reshape(D, -1))
    t["embeds.proj.bias"] = t.pop("patch_embed.proj.bias")
    side = IMG // PATCH
    t["embeds.pos_embed"] = np.ascontiguousarray(t.pop("pos_embed").reshape(1, side, side, D))
    write_safetensors(folder / "model.safetensors", t)
    config = {"architecture": "naflexvit_base_patch16_siglip", "num_classes": 0, "global_pool": "map",
              "model_args": {"embed_dim": D, "depth": DEPTH, "num_heads": HEADS, "patch_size": PATCH,
                             "pos_embed_grid_size": [side, side]},
              "pretrained_cfg": {"interpolation": "bicubic", "mean": [0.5] * 3, "std": [0.5] * 3}}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_logits_of_a_naflex_model_are_refused_naming_what_it_takes(images, tmp_path):
    """A NaFlex model takes each image at its own aspect ratio as patches within its budget: logits() of a fixed
    [B, 3, H, W] tensor and preprocess() are ValueErrors saying so; its image files embed,
    each image of a batch that mixes shapes as alone; max_patches for a square model is a ValueError."""
    folder = timm_naflex(tmp_path / "naflex")
    c = vit.Classifier(folder, threads=1, batch=3, max_patches=12)
    for call in (lambda: c.logits(np.zeros((1, 3, IMG, IMG), np.float32)),
                 lambda: c.preprocess(images[0])):
        with pytest.raises(ValueError, match="is a NaFlex model .*not a fixed \\[B, 3, H, W\\] tensor"):
            call()
    together = c.embed(images)["embeddings"]
    assert together.shape == (3, D) and np.isfinite(together).all()
    for i, f in enumerate(images):
        np.testing.assert_array_equal(c.embed([f])["embeddings"][0], together[i])
    with pytest.raises(ValueError, match="^max_patches applies to NaFlex models") as refused:
        vit.Classifier(timm_siglip(tmp_path / "square"), max_patches=12)
    assert "timm's naflexvit_*" in str(refused.value) and "use_naflex=True" in str(refused.value), refused.value
