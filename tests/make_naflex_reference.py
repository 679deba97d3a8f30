"""timm's NaFlex preprocessing and per-grid position tables on photos of very different shapes: the
reference side of tests/test_naflex_timm.cpp. Run by the project's .venv Python (timm from
tests/requirements.txt over Debian's torch; scripts/setup.sh installs it); nothing it writes is committed.

  tests/make_naflex_reference.py OUT_DIR PHOTO...

OUT_DIR/images/<name>.png            the inputs, made from the photos and by hand (PNG: what PIL reads back
                                     is what was written): a 3000x600 panorama, a portrait, a square, a photo
                                     as it is, strips one pixel wide and one pixel tall, a 20x12 image smaller
                                     than any budget, a single pixel and a 333x177 noise
OUT_DIR/reference.safetensors        for each budget N in BUDGETS, through timm's eval transform
                                     create_transform(naflex=True, patchify=True, max_seq_len=N,
                                     interpolation='bicubic', SigLIP's mean and std):
    <name>.<N>.patches  [n, 768]     the image's patches (channels last, row-major)
    <name>.<N>.coord    [n, 2]       their (row, column), as F32
    <name>.<N>.valid    [n]          U8
  then all the images collated by NaFlexCollator(max_seq_len=N) and given to timm's NaFlexEmbeds
  (learned 16x16 position table of width 64, random), whose _apply_learned_naflex_pos_embed resizes the
  table per grid with F.interpolate(mode, antialias=True) and adds it to zero tokens:
    batch.<N>.coord     [B, N, 2]    F32
    batch.<N>.valid     [B, N]       U8
    batch.<N>.pos_<mode> [B, N, 64]  for mode bilinear (SigLIP 2's) and bicubic (timm's default)
    pos_table           [16, 16, 64]
    __metadata__ {"names": [...], "budgets": [...]}
"""
import json
import os
import sys

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from timm.data import create_transform
from timm.data.naflex_dataset import NaFlexCollator
from timm.models.naflexvit import NaFlexEmbeds

BUDGETS = [256, 64]
MEAN = STD = (0.5, 0.5, 0.5)  # SigLIP's
WIDTH = 64


def make_images(photos, out):
    tench, cat, airliner = (Image.open(p).convert("RGB") for p in photos[:3])
    rng = np.random.default_rng(34)
    w, h = cat.size
    images = {
        "panorama": airliner.resize((3000, 600), Image.BICUBIC),
        "portrait": cat.crop(((w - h * 2 // 3) // 2, 0, (w - h * 2 // 3) // 2 + h * 2 // 3, h)),
        "square": tench.crop((0, 0, min(tench.size), min(tench.size))),
        "photo": tench,
        "column": airliner.crop((200, 0, 201, airliner.size[1])).resize((1, 700), Image.BICUBIC),
        "row": cat.crop((0, 100, cat.size[0], 101)).resize((900, 1), Image.BICUBIC),
        "small": cat.resize((20, 12), Image.BICUBIC),
        "pixel": Image.new("RGB", (1, 1), (200, 30, 90)),
        "noise": Image.fromarray(rng.integers(0, 256, (177, 333, 3), dtype=np.uint8), "RGB"),
    }
    os.makedirs(os.path.join(out, "images"))
    for name, img in images.items():
        img.save(os.path.join(out, "images", name + ".png"))
    # What the engine decodes is what PIL reads back.
    return {name: Image.open(os.path.join(out, "images", name + ".png")).convert("RGB") for name in images}


def main(out, photos):
    os.makedirs(out, exist_ok=True)
    images = make_images(photos, out)
    names = list(images)
    torch.manual_seed(34)
    embeds = {mode: NaFlexEmbeds(patch_size=16, embed_dim=WIDTH, proj_type="linear", class_token=False,
                                 pos_embed="learned", pos_embed_grid_size=(16, 16), pos_embed_interp_mode=mode)
              for mode in ("bilinear", "bicubic")}
    table = torch.randn(1, 16, 16, WIDTH)
    for e in embeds.values():
        e.pos_embed.data.copy_(table)
    tensors = {"pos_table": table[0].contiguous()}
    for n in BUDGETS:
        transform = create_transform(input_size=(3, 384, 384), is_training=False, naflex=True, patchify=True,
                                     max_seq_len=n, patch_size=16, interpolation="bicubic", mean=MEAN, std=STD)
        items = []
        for name in names:
            d = transform(images[name])
            tensors[f"{name}.{n}.patches"] = d["patches"].float().contiguous()
            tensors[f"{name}.{n}.coord"] = d["patch_coord"].float().contiguous()
            tensors[f"{name}.{n}.valid"] = d["patch_valid"].to(torch.uint8).contiguous()
            items.append((d, 0))
        batch, _ = NaFlexCollator(max_seq_len=n)(items)
        tensors[f"batch.{n}.coord"] = batch["patch_coord"].float().contiguous()
        tensors[f"batch.{n}.valid"] = batch["patch_valid"].to(torch.uint8).contiguous()
        for mode, e in embeds.items():
            with torch.no_grad():
                x = torch.zeros(len(names), n, WIDTH)
                e._apply_learned_naflex_pos_embed(x, patch_coord=batch["patch_coord"])
            tensors[f"batch.{n}.pos_{mode}"] = x.contiguous()
    save_file(tensors, os.path.join(out, "reference.safetensors"),
              metadata={"names": json.dumps(names), "budgets": json.dumps(BUDGETS)})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
