#!/usr/bin/env python3
"""Writes the class names and their text embeddings that `vit classify --text-embeddings` labels images with,
from an OpenCLIP CLIP model's text tower, as open_clip's own zero-shot classifier builds them: every class name
in every prompt template ("a photo of a {}." ...), each text embedding normalised, their mean per class
normalised again (open_clip.build_zero_shot_classifier). Runs with the project's .venv Python (open_clip_torch
from tests/requirements.txt); the engine itself stays image-only.

  scripts/export_text_embeddings.py --model DIR -o classes.safetensors tench "Siamese cat" airliner
  scripts/export_text_embeddings.py --model ViT-B-32 --pretrained open_clip_model.safetensors \
      --classes labels.txt --templates simple -o classes.safetensors

--model: a folder holding open_clip_model.safetensors and open_clip_config.json (an OpenCLIP hub repository),
or one of open_clip's model names with --pretrained FILE. Output: F32 `text_embeddings` [C, E], unit rows, and
__metadata__ {"labels": JSON list of the C names, "logit_scale": the model's logit_scale.exp(), "activation":
"softmax", "templates": how many, "model": --model}.
"""
import argparse
import json
import os
import sys

import torch
import open_clip
from safetensors.torch import load_file, save_file

TEMPLATES = {"openai": open_clip.OPENAI_IMAGENET_TEMPLATES, "simple": (lambda c: f"a photo of a {c}.",)}


def load(args):
    if os.path.isdir(args.model):
        with open(os.path.join(args.model, "open_clip_config.json")) as f:
            cfg = json.load(f)["model_cfg"]
        if "hf_model_name" in cfg.get("text_cfg", {}) or "timm_model_name" in cfg.get("vision_cfg", {}):
            sys.exit(f"error: {args.model}: only OpenCLIP's own CLIP towers are supported (no hf_model_name or "
                     "timm_model_name)")
        model = open_clip.CLIP(**cfg)
        model.load_state_dict(load_file(os.path.join(args.model, "open_clip_model.safetensors")))
        tokenizer = open_clip.tokenizer.SimpleTokenizer(context_length=cfg.get("text_cfg", {}).get("context_length", 77))
    else:
        if not args.pretrained:
            sys.exit(f"error: {args.model} is not a folder: an open_clip model name needs --pretrained FILE")
        model = open_clip.create_model(args.model, pretrained=args.pretrained)
        tokenizer = open_clip.get_tokenizer(args.model)
    return model.eval(), tokenizer


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="OpenCLIP folder, or an open_clip model name with --pretrained")
    p.add_argument("--pretrained", help="the weights file for an open_clip model name")
    p.add_argument("--classes", help="a file of class names, one per line")
    p.add_argument("--templates", choices=sorted(TEMPLATES), default="openai",
                   help="openai: CLIP's 80 ImageNet prompts (default); simple: 'a photo of a {}.'")
    p.add_argument("-o", "--out", required=True)
    p.add_argument("names", nargs="*", help="class names (or --classes)")
    args = p.parse_args()
    names = list(args.names)
    if args.classes:
        with open(args.classes, encoding="utf-8") as f:
            names += [line.strip() for line in f if line.strip()]
    if not names:
        sys.exit("error: no class names (give them as arguments or with --classes)")
    if len(set(names)) != len(names):
        sys.exit("error: a class name is given twice")
    model, tokenizer = load(args)
    templates = TEMPLATES[args.templates]
    with torch.no_grad():
        classifier = open_clip.build_zero_shot_classifier(model, tokenizer, names, templates)  # [E, C]
        scale = float(model.logit_scale.exp())
    meta = {"labels": json.dumps(names), "logit_scale": repr(scale), "activation": "softmax",
            "templates": str(len(templates)), "model": args.model}
    save_file({"text_embeddings": classifier.T.contiguous().float()}, args.out, metadata=meta)
    print(f"{args.out}: {len(names)} classes, width {classifier.shape[0]}, logit scale {scale:.4g}")


if __name__ == "__main__":
    main()
