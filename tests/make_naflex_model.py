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
"""
import json
import os
import sys

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


def main(out, photos):
    os.makedirs(out, exist_ok=True)
    images = make_images(photos, out)
    names = list(images)
    torch.manual_seed(34)
    model = create_model(ARCH, pretrained=False, num_classes=0, **ARGS).eval()
    with torch.no_grad():  # timm's init leaves norms at 1/0 and biases at 0: make every parameter matter
        for name, p in model.named_parameters():
            if name.endswith(".bias") or "norm" in name or "latent" in name or "pos_embed" in name:
                p.add_(torch.randn_like(p) * 0.1)
    folder = os.path.join(out, "model")
    os.makedirs(folder, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(folder, "model.safetensors"))
    config = {"architecture": ARCH, "num_classes": 0, "num_features": ARGS["embed_dim"], "global_pool": "map",
              "model_args": ARGS,
              "pretrained_cfg": {"tag": "random", "input_size": [3, 384, 384], "interpolation": "bicubic",
                                 "crop_pct": 1.0, "mean": list(MEAN), "std": list(STD)}}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    tensors = {}
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
    save_file(tensors, os.path.join(out, "reference.safetensors"),
              metadata={"names": json.dumps(names), "budgets": json.dumps(BUDGETS)})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
