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

# name: (architecture, model_args, grid). DINOv3 is dynamic: one model, any grid; the others' grid is the one
# their model is made at (grid None: get_embed() of the model at model_args' img_size).
CASES = {
    "eva02_16x16": ("eva02_tiny_patch14_224", dict(embed_dim=64, num_heads=2), None),
    "eva02_12x12": ("eva02_tiny_patch14_224", dict(embed_dim=64, num_heads=2, img_size=168), None),
    "pe_core_24x24": ("vit_pe_core_small_patch16_384", dict(embed_dim=64, num_heads=2), None),
    "pe_core_14x14": ("vit_pe_core_small_patch16_384", dict(embed_dim=128, num_heads=2, img_size=224), None),
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
        grid = list(grid) if grid else list(model.patch_embed.grid_size)
        with torch.no_grad():
            embed = rope.get_embed(shape=grid) if type(rope).__name__ == "RotaryEmbeddingDinoV3" else rope.get_embed()
        tensors[name + ".embed"] = embed.float().contiguous()
        # What the model passed its rotary module (eva.py Eva.__init__), for the engine's side of the comparison.
        meta[name] = {"arch": arch, "head_dim": args["embed_dim"] // args["num_heads"], "grid": grid,
                      "patch": model.patch_embed.patch_size[0], "module": type(rope).__name__,
                      "temperature": getattr(rope, "temperature", None),
                      "rotate_half": getattr(rope, "rotate_half", None),
                      "grid_offset": getattr(rope, "grid_offset", 0.0),
                      "grid_indexing": getattr(rope, "grid_indexing", "ij"),
                      "ref_feat_shape": list(rope.ref_feat_shape) if getattr(rope, "ref_feat_shape", None) else None}
        print(name, type(rope).__name__, tuple(embed.shape), flush=True)
    save_file(tensors, os.path.join(out, "rope_tables.safetensors"), metadata={"cases": json.dumps(meta)})


if __name__ == "__main__":
    main()
