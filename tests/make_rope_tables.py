"""timm's own rotary angle tables, from the rotary modules of its models: the reference side of
tests/test_positions.cpp. Run by the project's .venv Python (timm from tests/requirements.txt over Debian's
torch); nothing it writes is committed.

  tests/make_rope_tables.py OUT_DIR [PHOTO...]

OUT_DIR/rope_tables.safetensors, per case <name>:
    <name>.embed   [N, 2 Dh]   model.rope.get_embed(shape) for a gh x gw grid: sin then cos in the module's
                               own channel layout (rotate-half for DINOv3)
    __metadata__   {<name>: {"arch", "head_dim", "grid": [gh, gw], ...}}
The modules are those of timm's models themselves (timm.create_model with a shrunk width), so a setting
the model passes its rotary module (temperature, grid offset, indexing, reference grid) is the one tested.
"""
import json
import os
import sys

import torch
import timm
from safetensors.torch import save_file

# name: (architecture, model_args, grid). DINOv3 is dynamic: one model, any grid.
CASES = {
    "dinov3_dh32_16x16": ("vit_small_patch16_dinov3", dict(embed_dim=64, num_heads=2), (16, 16)),
    "dinov3_dh32_14x14": ("vit_small_patch16_dinov3", dict(embed_dim=64, num_heads=2), (14, 14)),
    "dinov3_dh64_12x20": ("vit_base_patch16_dinov3", dict(embed_dim=128, num_heads=2), (12, 20)),
    "dinov3_dh64_37x37": ("vit_large_patch16_dinov3", dict(embed_dim=128, num_heads=2), (37, 37)),
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tensors, meta = {}, {}
    for name, (arch, args, grid) in CASES.items():
        model = timm.create_model(arch, pretrained=False, depth=1, **args).eval()
        rope = model.rope
        with torch.no_grad():
            embed = rope.get_embed(shape=list(grid))
        tensors[name + ".embed"] = embed.float().contiguous()
        meta[name] = {"arch": arch, "head_dim": args["embed_dim"] // args["num_heads"], "grid": list(grid),
                      "module": type(rope).__name__, "temperature": getattr(rope, "temperature", None),
                      "rotate_half": getattr(rope, "rotate_half", None)}
        print(name, type(rope).__name__, tuple(embed.shape), flush=True)
    save_file(tensors, os.path.join(out, "rope_tables.safetensors"), metadata={"cases": json.dumps(meta)})


if __name__ == "__main__":
    main()
