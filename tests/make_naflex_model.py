"""A shrunk random-weight naflexvit_base_patch16_siglip made by timm, and its embeddings through timm's whole
NaFlex pipeline on photos of very different shapes: the reference side of tests/test_naflex_timm.cpp's model
tests. Run by the project's .venv Python (timm from tests/requirements.txt over Debian's torch); nothing it
writes is committed.

  tests/make_naflex_model.py OUT_DIR PHOTO...

OUT_DIR/images/<name>.png         the images of make_naflex_reference.py (a 3000x600 panorama, a portrait, a
                                  square, a photo, one-pixel strips, a 20x12 image, a pixel, noise)
OUT_DIR/model/model.safetensors   timm's state_dict of naflexvit_base_patch16_siglip at width 64, depth 2,
OUT_DIR/model/config.json         2 heads (its layer norms, biases and latent made non-trivial), and the
                                  config timm's save_config_for_hf writes for it, with model_args
OUT_DIR/reference.safetensors     for each budget N in BUDGETS:
    <name>.<N>                    [64] forward_head(pre_logits) of the image alone, through
                                  create_transform(naflex=True, patchify=True, max_seq_len=N, bicubic,
                                  SigLIP's mean and std) and NaFlexCollator(max_seq_len=N)
    <name>.<N>.tokens             [n, 64] its forward_features (after the final norm), its n patches' rows
    batch.<N>                     [B, 64] every image in one batch collated by NaFlexCollator
    __metadata__ {"names": [...], "budgets": [...]}
OUT_DIR/classifier/               the same model with a 5-class head (model.safetensors, config.json)
OUT_DIR/siglip/                   a shrunk vit_base_patch16_siglip_224 made with use_naflex=True (timm's NaFlexVit
                                  form of a classic SigLIP tower: its table resized bicubically), config.json saying
                                  model_args use_naflex true
    siglip.<name>.<N>, siglip.batch.<N>   in reference.safetensors, as for the NaFlex tower
OUT_DIR/explain.safetensors       for the classifier, each of EXPLAINED alone at each budget N, from timm's own
                                  attention probabilities (its unfused attention, the collator's mask):
    <name>.<N>.rollout            [rows, cols] attention rollout over the image's own grid (the mean of all
                                  tokens' rows, as vit explain asks a model without a class token)
    <name>.<N>.last               [H, rows, cols] the last block's attention of that query, per head
    <name>.<N>.logits             [5]
"""
import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file
from timm import create_model
from timm.data import create_transform
from timm.data.naflex_dataset import NaFlexCollator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_naflex_reference import make_images  # noqa: E402

ARCH = "naflexvit_base_patch16_siglip"
ARGS = {"embed_dim": 64, "depth": 2, "num_heads": 2}
BUDGETS = [256, 64]
MEAN = STD = (0.5, 0.5, 0.5)  # SigLIP's
CLASSES = 5
SIGLIP = "vit_base_patch16_siglip_224"
EXPLAINED = ["panorama", "portrait", "square"]


def random_model(num_classes, arch=ARCH, **kwargs):
    """The shrunk tower, its layer norms, biases, latent and position table made non-trivial (timm's init
    leaves norms at 1/0 and biases at 0)."""
    torch.manual_seed(34)
    model = create_model(arch, pretrained=False, num_classes=num_classes, **ARGS, **kwargs).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or "norm" in name or "latent" in name or "pos_embed" in name:
                p.add_(torch.randn_like(p) * 0.1)
            elif name == "head.weight":  # logits far enough apart that the top class is not a tie
                p.copy_(torch.randn_like(p))
    return model


def save_model(model, folder, num_classes, arch=ARCH, **kwargs):
    os.makedirs(folder, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(folder, "model.safetensors"))
    config = {"architecture": arch, "num_classes": num_classes, "num_features": ARGS["embed_dim"], "global_pool": "map",
              "model_args": {**ARGS, **kwargs},
              "pretrained_cfg": {"tag": "random", "input_size": [3, 384, 384], "interpolation": "bicubic",
                                 "crop_pct": 1.0, "mean": list(MEAN), "std": list(STD)}}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def rollout(blocks):
    """Attention rollout (Abnar & Zuidema; head_fusion=mean, discard_ratio=0) of the mean of all rows, over
    blocks of [H, n, n]: A = the heads' mean, 0.5 A + 0.5 I with rows renormalised, R = A_L ... A_1; the
    query's row of R, divided by its maximum."""
    n = blocks[0].shape[-1]
    R = np.eye(n)
    for a in blocks:
        A = 0.5 * a.mean(0) + 0.5 * np.eye(n)
        R = (A / A.sum(-1, keepdims=True)) @ R
    row = np.full(n, 1.0 / n) @ R
    return row / row.max()


def explain_references(model, transform, images, n):
    """Each image of EXPLAINED alone through the collator, its blocks' attention probabilities caught from
    timm's unfused attention (the softmax after the collator's mask), cut to the image's own tokens."""
    probs = []
    for blk in model.blocks:
        blk.attn.fused_attn = False
        blk.attn.attn_drop.register_forward_hook(lambda m, i, o: probs.append(o[0].double().numpy()))
    out = {}
    for name in EXPLAINED:
        probs.clear()
        batch, _ = NaFlexCollator(max_seq_len=n)([(transform(images[name]), 0)])
        with torch.no_grad():
            logits = model(batch)[0]
        valid = int(batch["patch_valid"][0].sum())
        rows, cols = (int(v) + 1 for v in batch["patch_coord"][0, valid - 1])
        blocks = [p[:, :valid, :valid] for p in probs]
        out[f"{name}.{n}.rollout"] = torch.tensor(rollout(blocks), dtype=torch.float32).reshape(rows, cols)
        last = (blocks[-1].mean(1)).astype(np.float32)  # the mean of the query rows, per head
        out[f"{name}.{n}.last"] = torch.tensor(last).reshape(-1, rows, cols)
        out[f"{name}.{n}.logits"] = logits.contiguous()
    return out


def main(out, photos):
    os.makedirs(out, exist_ok=True)
    images = make_images(photos, out)
    names = list(images)
    model = random_model(0)
    save_model(model, os.path.join(out, "model"), 0)
    classifier = random_model(CLASSES)
    save_model(classifier, os.path.join(out, "classifier"), CLASSES)
    siglip = random_model(0, SIGLIP, use_naflex=True)
    save_model(siglip, os.path.join(out, "siglip"), 0, SIGLIP, use_naflex=True)
    tensors, explained = {}, {}
    for n in BUDGETS:
        transform = create_transform(input_size=(3, 384, 384), is_training=False, naflex=True, patchify=True,
                                     max_seq_len=n, patch_size=16, interpolation="bicubic", mean=MEAN, std=STD)
        collate = NaFlexCollator(max_seq_len=n)
        items = [(transform(images[name]), 0) for name in names]
        with torch.no_grad():
            for name, item in zip(names, items):
                batch, _ = collate([item])
                tensors[f"{name}.{n}"] = model(batch)[0].contiguous()
                features = model.forward_features(batch["patches"], batch["patch_coord"], batch["patch_valid"])
                valid = int(batch["patch_valid"][0].sum())
                tensors[f"{name}.{n}.tokens"] = features["patches"][0, :valid].contiguous()
            batch, _ = collate(items)
            tensors[f"batch.{n}"] = model(batch).contiguous()
            for name, item in zip(names, items):
                tensors[f"siglip.{name}.{n}"] = siglip(collate([item])[0])[0].contiguous()
            tensors[f"siglip.batch.{n}"] = siglip(batch).contiguous()
        explained.update(explain_references(classifier, transform, images, n))
    save_file(tensors, os.path.join(out, "reference.safetensors"),
              metadata={"names": json.dumps(names), "budgets": json.dumps(BUDGETS)})
    save_file(explained, os.path.join(out, "explain.safetensors"),
              metadata={"names": json.dumps(EXPLAINED), "budgets": json.dumps(BUDGETS)})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
