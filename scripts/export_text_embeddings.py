#!/usr/bin/env python3
"""Writes the class names and their text embeddings that `vit classify --text-embeddings` labels images with,
from the model's own text tower, as its library's zero-shot classification builds them. OpenCLIP CLIP models:
every class name in every prompt template ("a photo of a {}." ...), each text embedding normalised, their mean
per class normalised again (open_clip.build_zero_shot_classifier), scored by softmax. Hugging Face SiglipModel:
"This is a photo of {}." (transformers' zero-shot pipeline for SigLIP), padded to max_length as SigLIP was
trained, scored by a sigmoid with the model's logit bias. Runs with the project's .venv Python (open_clip_torch,
transformers and sentencepiece from tests/requirements.txt); the engine itself stays image-only.

  scripts/export_text_embeddings.py --model DIR -o classes.safetensors tench "Siamese cat" airliner
  scripts/export_text_embeddings.py --model ViT-B-32 --pretrained open_clip_model.safetensors \
      --classes labels.txt --templates simple -o classes.safetensors

--model: a folder holding open_clip_model.safetensors and open_clip_config.json (an OpenCLIP hub repository),
one of open_clip's model names with --pretrained FILE, or a Hugging Face SiglipModel folder (config.json,
model.safetensors and its tokenizer, as google/siglip-* hold them). Output: F32 `text_embeddings` [C, E], unit
rows, and __metadata__ {"labels": JSON list of the C names, "logit_scale": the model's logit_scale.exp(),
"logit_bias" (SigLIP), "activation": "softmax" or "sigmoid", "templates": how many, "model": --model}.
"""
import argparse
import json
import os
import sys

import torch
import open_clip
from safetensors.torch import load_file, save_file

TEMPLATES = {"openai": open_clip.OPENAI_IMAGENET_TEMPLATES, "simple": (lambda c: f"a photo of a {c}.",),
             "siglip": ("This is a photo of {}.",)}


def is_siglip(folder):
    path = os.path.join(folder, "config.json")
    if not os.path.isdir(folder) or not os.path.exists(path):
        return False
    with open(path) as f:
        return json.load(f).get("model_type") == "siglip"


def siglip_classifier(args, names, templates):
    """SiglipModel.get_text_features of each prompt, normalised (as SiglipModel.forward does), averaged over the
    templates and normalised again."""
    from transformers import AutoTokenizer, SiglipModel
    model = SiglipModel.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    rows = []
    with torch.no_grad():
        for name in names:
            texts = [t.format(name) if isinstance(t, str) else t(name) for t in templates]
            ids = tokenizer(texts, padding="max_length", return_tensors="pt")["input_ids"]
            e = torch.nn.functional.normalize(model.get_text_features(input_ids=ids), dim=-1).mean(dim=0)
            rows.append(e / e.norm())
    meta = {"logit_scale": repr(float(model.logit_scale.exp())), "logit_bias": repr(float(model.logit_bias)),
            "activation": "sigmoid"}
    return torch.stack(rows), meta


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
    p.add_argument("--templates", choices=sorted(TEMPLATES),
                   help="openai: CLIP's 80 ImageNet prompts (OpenCLIP's default); simple: 'a photo of a {}.'; "
                        "siglip: 'This is a photo of {}.' (SigLIP's default)")
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
    if is_siglip(args.model):
        templates = TEMPLATES[args.templates or "siglip"]
        text, meta = siglip_classifier(args, names, templates)
    else:
        model, tokenizer = load(args)
        templates = TEMPLATES[args.templates or "openai"]
        with torch.no_grad():
            text = open_clip.build_zero_shot_classifier(model, tokenizer, names, templates).T  # [C, E]
            meta = {"logit_scale": repr(float(model.logit_scale.exp())), "activation": "softmax"}
    meta.update({"labels": json.dumps(names), "templates": str(len(templates)), "model": args.model})
    save_file({"text_embeddings": text.contiguous().float()}, args.out, metadata=meta)
    print(f"{args.out}: {len(names)} classes, width {text.shape[1]}, logit scale {float(meta['logit_scale']):.4g}, "
          f"{meta['activation']}")


if __name__ == "__main__":
    main()
