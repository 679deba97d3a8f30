#!/usr/bin/python3
"""Builds the PyTorch side of tests/test_export.cpp with Debian's python3-torch (seeded, nothing committed):

  random/<name>/model.pth         torchvision VisionTransformer state dicts (ViT-S/16, ViT-B/32, ViT-Ti/8,
                                  depth reduced), every tensor random so all of them matter
  random/<name>/reference.safetensors
                                  `input` [2,3,S,S] and the `logits` PyTorch computes for it (also
                                  `logits_f16` / `logits_bf16`: the same model with weights rounded)
  deit/deit_timm.pth, deit/deit_torchvision.pth
                                  the real DeiT-Tiny weights (from DEIT_SAFETENSORS) saved by torch.save,
                                  in timm's and in torchvision's names
  tests/make_torch_models.py OUT_DIR DEIT_SAFETENSORS
"""
import os
import sys

import torch
from torchvision.models import VisionTransformer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "weights"))
import export  # noqa: E402  (the repo's own exporter: its safetensors reader and writer)

SPECS = {  # name: image, patch, depth, heads, width, mlp
    "vit_small_patch16_224_depth4": (224, 16, 4, 6, 384, 1536),
    "vit_base_patch32_224_depth2": (224, 32, 2, 12, 768, 3072),
    "vit_tiny_patch8_224_depth2": (224, 8, 2, 3, 192, 768),
}


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 0.1 if p.dim() == 1 else (1.0 / p[0].numel()) ** 0.5
            base = 1.0 if name.endswith(("ln_1.weight", "ln_2.weight", "ln.weight")) else 0.0
            p.copy_(base + scale * torch.randn(p.shape, generator=g))


def rounded(model, dtype):
    m = VisionTransformer(**model.args)
    m.load_state_dict({k: v.to(dtype).float() for k, v in model.state_dict().items()})
    return m.eval()


def main():
    out, deit = sys.argv[1], sys.argv[2]
    torch.set_num_threads(2)
    for i, (name, (img, patch, depth, heads, width, mlp)) in enumerate(SPECS.items()):
        d = os.path.join(out, "random", name)
        os.makedirs(d, exist_ok=True)
        args = dict(image_size=img, patch_size=patch, num_layers=depth, num_heads=heads, hidden_dim=width, mlp_dim=mlp)
        m = VisionTransformer(**args).eval()
        m.args = args
        randomize(m, 100 + i)
        x = torch.randn(2, 3, img, img, generator=torch.Generator().manual_seed(7))
        with torch.no_grad():
            ref = {"input": x, "logits": m(x), "logits_f16": rounded(m, torch.float16)(x),
                   "logits_bf16": rounded(m, torch.bfloat16)(x)}
        torch.save(m.state_dict(), os.path.join(d, "model.pth"))
        export.write_safetensors(os.path.join(d, "reference.safetensors"), ref, "f32")
        print(f"{name}: logits std {ref['logits'].std():.3f}")

    d = os.path.join(out, "deit")
    os.makedirs(d, exist_ok=True)
    sd = export.read_safetensors(deit)
    torch.save(sd, os.path.join(d, "deit_timm.pth"))
    tv = {}
    to_tv = {"cls_token": "class_token", "pos_embed": "encoder.pos_embedding", "patch_embed.proj": "conv_proj",
             "norm": "encoder.ln", "head": "heads.head"}
    block = {"norm1": "ln_1", "norm2": "ln_2", "attn.qkv.weight": "self_attention.in_proj_weight",
             "attn.qkv.bias": "self_attention.in_proj_bias", "attn.proj": "self_attention.out_proj",
             "mlp.fc1": "mlp.0", "mlp.fc2": "mlp.3"}
    for name, t in sd.items():
        if name.startswith("blocks."):
            _, i, rest = name.split(".", 2)
            for k, v in block.items():
                if rest == k or rest.startswith(k + "."):
                    rest = v + rest[len(k):]
                    break
            tv[f"encoder.layers.encoder_layer_{i}.{rest}"] = t
        else:
            top, _, leaf = name.rpartition(".") if name not in to_tv else (name, "", "")
            tv[to_tv[top] + ("." + leaf if leaf else "")] = t
    torch.save({"model": tv}, os.path.join(d, "deit_torchvision.pth"))  # wrapped, as training scripts save
    print("deit: timm and torchvision copies written")


if __name__ == "__main__":
    main()
