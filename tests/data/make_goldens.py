#!/usr/bin/python3
"""Writes the small goldens the unit tests compare against, so that a clone without ../shared still
proves preprocessing parity: Pillow's resampling of a tiny image with every filter, a CMYK JPEG and
the RGB pixels Pillow decodes from it, torch's antialiased bicubic interpolation of a small grid
(timm's resample_abs_pos_embed), and torch's antialiased bilinear and bicubic interpolation of a 16 x 16
table to the grids NaFlex images take (timm's NaFlexEmbeds: a panorama's 7 x 35, a strip's 1 x 256 ...). Run with Debian's python3 (python3-pil, python3-torch):

  tests/data/make_goldens.py tests/data
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "weights"))
import export  # noqa: E402  (the repo's own safetensors writer)

FILTERS = {"nearest": Image.NEAREST, "box": Image.BOX, "bilinear": Image.BILINEAR, "hamming": Image.HAMMING,
           "bicubic": Image.BICUBIC, "lanczos": Image.LANCZOS}
SIZES = [(5, 4), (21, 17), (13, 6)]  # (width, height): down, up, one side each way
# (rows, cols) of NaFlex grids: a panorama, a portrait, strips both ways, larger and smaller than 16 x 16
NAFLEX_GRIDS = [(7, 35), (35, 7), (1, 256), (256, 1), (14, 18), (16, 16), (24, 24), (4, 16), (3, 5), (22, 11)]


def main(out):
    rng = np.random.default_rng(7)
    tensors = {}
    src = Image.fromarray(rng.integers(0, 256, (11, 13, 3), dtype=np.uint8), "RGB")
    src.save(os.path.join(out, "resample_src.png"))
    for name, f in FILTERS.items():
        for w, h in SIZES:
            tensors[f"{name}_{w}x{h}"] = np.asarray(src.resize((w, h), f), dtype=np.uint8)

    cmyk = Image.fromarray(rng.integers(0, 256, (6, 8, 4), dtype=np.uint8), "CMYK")
    cmyk_path = os.path.join(out, "cmyk.jpg")
    cmyk.save(cmyk_path, quality=95)
    tensors["cmyk_rgb"] = np.asarray(Image.open(cmyk_path).convert("RGB"), dtype=np.uint8)

    grid = torch.from_numpy(rng.standard_normal((1, 3, 4, 4)).astype(np.float32))
    tensors["grid_in"] = grid[0].permute(1, 2, 0).contiguous().numpy()  # [H, W, C], as resample_grid takes it
    for h, w in [(6, 6), (3, 5), (7, 2)]:
        y = F.interpolate(grid, size=(h, w), mode="bicubic", antialias=True, align_corners=False)
        tensors[f"grid_{h}x{w}"] = y[0].permute(1, 2, 0).contiguous().numpy()

    table = torch.from_numpy(rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
    tensors["table16"] = table[0].permute(1, 2, 0).contiguous().numpy()
    for mode in ("bilinear", "bicubic"):
        for h, w in NAFLEX_GRIDS:
            y = F.interpolate(table, size=(h, w), mode=mode, antialias=True, align_corners=False)
            tensors[f"table16_{mode}_{h}x{w}"] = y[0].permute(1, 2, 0).contiguous().numpy()
    export.write_safetensors(os.path.join(out, "goldens.safetensors"),
                             {k: torch.from_numpy(np.array(v)) for k, v in tensors.items()},
                             metadata={"source": "tests/data/make_goldens.py"})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
