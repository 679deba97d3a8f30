#!/usr/bin/python3
"""Converts a PyTorch ViT state dict (.pth / .pt, timm or torchvision vit_b_16-style names) to the
model.safetensors + config.json that `vit` loads, tensors under their own names (the engine reads
both layouts), then reads the file back and checks every tensor. Runs with Debian's python3-torch;
no other packages.

  weights/export.py vit_b_16.pth out/ [--arch NAME] [--num-heads H] [--img-size S] [--dtype f32|f16|bf16]

The config always says what the tensors cannot: --arch names a timm architecture (its heads, block order,
eps, pooling and preprocessing are timm's for that name); without it the model is "vit_custom", timm's
VisionTransformer with the heads --num-heads gives (torchvision's own ViTs need none: their shape says
them) and the evaluation transform of the layout (timm's bicubic 0.9 crop, torchvision's bilinear 256/224,
ImageNet's mean and std).
"""
import argparse
import json
import os
import re
import struct
import sys

import torch

DTYPES = {"f32": (torch.float32, "F32"), "f16": (torch.float16, "F16"), "bf16": (torch.bfloat16, "BF16")}
# The few tensors config.json is derived from, by their timm and torchvision names. The tensors are
# written under the names they have: the engine's loader (models/checkpoint.cpp) reads either layout.
KEY_TENSORS = {
    "timm": {"patch": "patch_embed.proj.weight", "pos": "pos_embed", "cls": "cls_token", "head": "head.weight"},
    "torchvision": {"patch": "conv_proj.weight", "pos": "encoder.pos_embedding", "cls": "class_token",
                    "head": "heads.head.weight"},
}


# torchvision's ViTs (vit_b_16, vit_b_32, vit_l_16, vit_l_32, vit_h_14): (width, MLP width, depth) -> heads.
TORCHVISION_HEADS = {(768, 3072, 12): 12, (1024, 4096, 24): 16, (1280, 5120, 32): 16}


class ExportError(Exception):
    pass


def state_dict_of(obj, path):
    """The state dict inside what torch.save wrote: a plain dict, or one under model / state_dict."""
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    if isinstance(obj, dict):
        for key in ("model", "state_dict", "model_state_dict"):
            if key in obj and isinstance(obj[key], dict):
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not obj or not all(torch.is_tensor(v) for v in obj.values()):
        raise ExportError(f"{path}: not a state dict of tensors (found {type(obj).__name__})")
    return {re.sub(r"^(module\.|model\.)", "", k): v for k, v in obj.items()}


def layout_of(sd, path):
    """'timm' or 'torchvision', from the patch embedding's name."""
    for layout, keys in KEY_TENSORS.items():
        if keys["patch"] in sd:
            return layout
    raise ExportError(f"{path}: neither timm (patch_embed.proj.weight) nor torchvision (conv_proj.weight) names; "
                      f"first tensors: {', '.join(list(sd)[:5])}")


def write_safetensors(path, tensors, dtype=None, metadata=None):
    """Writes torch tensors, converted to dtype (f32, f16, bf16) or, with None, as they are (also uint8)."""
    header, blobs, offset = {"__metadata__": metadata or {"format": "pt"}}, [], 0
    for key in sorted(tensors):
        t = tensors[key].detach().contiguous().cpu()
        if dtype:
            t = t.to(DTYPES[dtype][0])
        name = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.uint8: "U8"}[t.dtype]
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[key] = {"dtype": name, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


def read_safetensors(path):
    """All tensors of a safetensors file, as torch tensors (F32, F16, BF16)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    kinds = {"F32": (torch.float32, torch.float32), "F16": (torch.float16, torch.float16),
             "BF16": (torch.int16, torch.bfloat16)}
    out = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        stored, real = kinds[entry["dtype"]]
        b, e = entry["data_offsets"]
        t = torch.frombuffer(bytearray(body[b:e]), dtype=stored) if e > b else torch.empty(0, dtype=stored)
        out[key] = t.view(real).reshape(entry["shape"])
    return out


def verify(path, tensors, dtype):
    """Reads the file back by the format's rules and compares every tensor with its source."""
    torch_dtype, name = DTYPES[dtype]
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    names = set(header) - {"__metadata__"}
    if names != set(tensors):
        raise ExportError(f"{path}: read back {len(names)} tensors, wrote {len(tensors)}")
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        b, e = entry["data_offsets"]
        want = tensors[key].detach().to(torch_dtype).contiguous().cpu()
        raw = (want.view(torch.int16) if torch_dtype == torch.bfloat16 else want).numpy().tobytes()
        if entry["dtype"] != name or entry["shape"] != list(want.shape) or body[b:e] != raw:
            raise ExportError(f"{path}: tensor {key} does not read back as written")
    return len(names)


def shape_of(tensors, layout):
    """(width, MLP width, depth) of the state dict."""
    fc1 = "blocks.0.mlp.fc1.weight" if layout == "timm" else "encoder.layers.encoder_layer_0.mlp.0.weight"
    block = re.compile(r"^(blocks|encoder\.layers\.encoder_layer_)\.?(\d+)\.")
    depth = 1 + max((int(m.group(2)) for m in map(block.match, tensors) if m), default=-1)
    width = tensors[KEY_TENSORS[layout]["patch"]].shape[0]
    return width, tensors[fc1].shape[0] if fc1 in tensors else 0, depth


def config_for(tensors, layout, args):
    keys = KEY_TENSORS[layout]
    width, _, patch, _ = tensors[keys["patch"]].shape
    grid = tensors[keys["pos"]].shape[1] - (keys["cls"] in tensors) - ("dist_token" in tensors)
    img = args.img_size or int(round(grid ** 0.5)) * patch
    torchvision = layout == "torchvision"
    model_args = {}
    heads = args.num_heads or (TORCHVISION_HEADS.get(shape_of(tensors, layout)) if torchvision else None)
    if heads:
        model_args["num_heads"] = heads
    elif not args.arch:
        raise ExportError("the number of heads is not in the tensors: give --num-heads H, or --arch NAME for a timm "
                          "architecture the model is (its heads, eps, pooling and preprocessing then timm's)")
    if args.arch:  # the rest is timm's for the architecture
        if args.img_size:
            model_args["img_size"] = args.img_size
        return {"architecture": args.arch, "num_classes": tensors[keys["head"]].shape[0], "model_args": model_args}
    if keys["cls"] not in tensors:
        model_args.update(class_token=False, global_pool="avg")
    return {
        "architecture": "vit_custom",
        "num_classes": tensors[keys["head"]].shape[0],
        "model_args": model_args,
        "pretrained_cfg": {
            "input_size": [3, img, img],
            # torchvision evaluates its ViTs with a bilinear resize to 256 and a 224 crop; timm's
            # ViTs use bicubic and 0.9.
            "interpolation": "bilinear" if torchvision else "bicubic",
            "crop_pct": 0.875 if torchvision else 0.9,
            "crop_mode": "center",
            "mean": [0.485, 0.456, 0.406],
            "std": [0.229, 0.224, 0.225],
        },
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help=".pth / .pt file holding a state dict")
    p.add_argument("out_dir", help="folder to write model.safetensors and config.json into")
    p.add_argument("--arch", help="the timm architecture the model is (e.g. vit_base_patch16_224): its settings and "
                                  "preprocessing are timm's")
    p.add_argument("--num-heads", type=int, help="attention heads (needed without --arch, but for torchvision's own ViTs)")
    p.add_argument("--img-size", type=int, help="input size (default: from the position table)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="f32", help="storage type (default f32)")
    args = p.parse_args()
    try:
        try:
            obj = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
        except Exception as e:  # pickle errors, zip errors, missing file: all reported the same way
            raise ExportError(f"{args.checkpoint}: cannot read as a PyTorch checkpoint: {e}") from None
        tensors = state_dict_of(obj, args.checkpoint)
        layout = layout_of(tensors, args.checkpoint)
        for needed in (KEY_TENSORS[layout]["pos"], KEY_TENSORS[layout]["head"]):
            if needed not in tensors:
                raise ExportError(f"{args.checkpoint}: missing tensor {needed}")
        config = config_for(tensors, layout, args)
        os.makedirs(args.out_dir, exist_ok=True)
        out = os.path.join(args.out_dir, "model.safetensors")
        write_safetensors(out, tensors, args.dtype)
        count = verify(out, tensors, args.dtype)
        with open(os.path.join(args.out_dir, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        print(f"{out}: {count} tensors in {layout} names, {args.dtype}, read back and checked")
    except (ExportError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
