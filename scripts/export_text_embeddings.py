#!/usr/bin/env python3
"""Writes the class names and their text embeddings that `vit classify --text-embeddings` labels images with,
from the model's own text tower, as its library's zero-shot classification builds them. OpenCLIP models (CLIP,
and the towers on timm trunks with a text tower of their own: ViT-B-16-SigLIP, ViT-SO400M-14-SigLIP-384,
EVA02-B-16, ...): every class name in every prompt template ("a photo of a {}." ...), each text embedding
normalised, their mean per class normalised again (open_clip.build_zero_shot_classifier), scored by softmax, or
for SigLIP (a model with a logit_bias) by a sigmoid with that bias. Hugging Face CLIPModel and
SiglipModel: "This is a photo of {}." (transformers' zero-shot pipeline), CLIP's padded to the longest prompt
with its attention mask, SigLIP's padded to max_length as SigLIP was trained; scored by softmax (CLIP) or by a
sigmoid with the model's logit bias (SigLIP). Runs with the project's .venv Python (open_clip_torch,
transformers, sentencepiece and protobuf from tests/requirements.txt); `vit classify --labels-text` makes the
same classifier with the engine's own text towers.

  scripts/export_text_embeddings.py --model DIR -o classes.safetensors tench "Siamese cat" airliner
  scripts/export_text_embeddings.py --model ViT-B-32 --pretrained open_clip_model.safetensors \
      --classes labels.txt --templates simple -o classes.safetensors

--model: a folder holding open_clip_model.safetensors and open_clip_config.json (an OpenCLIP hub repository),
one of open_clip's model names with --pretrained FILE, or a Hugging Face CLIPModel or SiglipModel folder
(config.json, model.safetensors and its tokenizer, as openai/clip-* and google/siglip-* hold them). Image towers
alone (timm's CLIP, SigLIP, EVA-02 CLIP and Perception Encoder models, CLIPVisionModel, SiglipVisionModel) have
no text tower and are refused.
--tokenizer DIR: a Hugging Face tokenizer folder for OpenCLIP models whose config names one on the hub
(text_cfg.hf_tokenizer_name: the SigLIP models' timm/ViT-B-16-SigLIP), which open_clip would download; without
it, the model folder's own tokenizer files (an OpenCLIP hub repository holds them), else the hub.
Output: F32 `text_embeddings` [C, E], unit rows, and __metadata__ {"labels": JSON list of the C names,
"logit_scale": the model's logit_scale.exp(), "logit_bias" (SigLIP), "activation": "softmax" or "sigmoid",
"templates": how many, "model": --model}. Every input is checked before any work; an existing output is
replaced only when it is such a file (or with --force). Bad input: one `error:` line, exit 2.
"""
import argparse
import enum
import json
import os
import struct
import sys

TEMPLATE_NAMES = {"openai": "CLIP's 80 ImageNet prompts (the default for OpenCLIP models)",
                  "simple": "'a photo of a {}.'",
                  "transformers": "'This is a photo of {}.', transformers' zero-shot pipeline's (the default for "
                                  "Hugging Face folders; also called siglip)",
                  "siglip": None}


class Kind(enum.Enum):
    OPENCLIP_FOLDER = "an OpenCLIP model"
    OPENCLIP_NAME = "an open_clip model name"
    HF_CLIP = "a Hugging Face CLIPModel"
    HF_SIGLIP = "a Hugging Face SiglipModel"


HF_TEXT_MODELS = {"clip": Kind.HF_CLIP, "siglip": Kind.HF_SIGLIP}  # config.json's model_type
OPENCLIP = (Kind.OPENCLIP_FOLDER, Kind.OPENCLIP_NAME)


def fail(message):
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    sys.exit(2)


def templates(name):
    if name == "openai":
        import open_clip
        return open_clip.OPENAI_IMAGENET_TEMPLATES
    return ("a photo of a {}.",) if name == "simple" else ("This is a photo of {}.",)


def is_text_embeddings(path):
    """Whether a file is this script's output: a safetensors file with text_embeddings and labels."""
    try:
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            if n > 100 << 20:
                return False
            header = json.loads(f.read(n))
    except (OSError, struct.error, ValueError):
        return False
    return isinstance(header, dict) and "text_embeddings" in header and \
        "labels" in (header.get("__metadata__") or {})


def check_output(out, force):
    if not out:
        fail("-o: an empty file name")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        fail(f"-o {out}: {'the folder ' + folder + ' does not exist' if not os.path.exists(folder) else folder + ' is not a folder'}")
    if not os.access(folder, os.W_OK):
        fail(f"-o {out}: the folder {folder} is not writable")
    if os.path.isdir(out):
        fail(f"-o {out} is a folder: name the file to write")
    if os.path.exists(out) and not force and not is_text_embeddings(out):
        fail(f"-o {out} exists and is not a text-embeddings file (this script's output): --force replaces it")


def class_names(args):
    names = [n.strip() for n in args.names]
    if args.classes:
        try:
            with open(args.classes, encoding="utf-8") as f:
                names += [line.strip() for line in f if line.strip()]
        except FileNotFoundError:
            fail(f"--classes {args.classes}: no such file")
        except IsADirectoryError:
            fail(f"--classes {args.classes} is a folder: give a file of class names, one per line")
        except UnicodeDecodeError:
            fail(f"--classes {args.classes}: not UTF-8 text")
        except OSError as e:
            fail(f"--classes {args.classes}: {e.strerror}")
    if not names:
        fail("no class names (give them as arguments or with --classes)")
    if "" in names:
        fail("an empty class name")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        fail(f"a class name is given twice: {repeated[0]}")
    return names


def model_kind(args):
    """What --model is, from its files alone (no model is loaded)."""
    model = args.model
    if os.path.isdir(model):
        if args.pretrained:
            fail(f"--pretrained goes with an open_clip model name, not with the folder {model}")
        if os.path.exists(os.path.join(model, "open_clip_config.json")):
            return Kind.OPENCLIP_FOLDER
        path = os.path.join(model, "config.json")
        if not os.path.exists(path):
            fail(f"{model} holds neither open_clip_config.json (an OpenCLIP model) nor config.json (Hugging Face)")
        try:
            with open(path) as f:
                cfg = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"{path}: not a JSON config: {e}")
        if not isinstance(cfg, dict):
            fail(f"{path}: not a JSON object")
        if "architecture" in cfg:
            fail(f"{model} is a timm model ({cfg['architecture']}): an image tower with no text tower. Make the file "
                 "from the same model's OpenCLIP or Hugging Face release, whose image side is the same")
        kind = cfg.get("model_type")
        if kind not in HF_TEXT_MODELS:
            what = ", ".join(cfg.get("architectures") or []) or f"model_type {kind!r}"
            fail(f"{model} is a Hugging Face {what}, which has no text tower: a whole CLIPModel or SiglipModel "
                 "folder has one")
        return HF_TEXT_MODELS[kind]
    if os.path.exists(model):
        fail(f"--model {model} is a file: give its folder, or an open_clip model name with --pretrained FILE")
    if not args.pretrained:
        fail(f"{model} is not a folder: an open_clip model name needs --pretrained FILE")
    if not os.path.isfile(args.pretrained):
        fail(f"--pretrained {args.pretrained}: no such file")
    return Kind.OPENCLIP_NAME


def hf_classifier(args, kind, names, prompts):
    """CLIPModel / SiglipModel.get_text_features of each prompt, normalised (as their forward does), averaged over
    the templates and normalised again."""
    import torch
    from transformers import AutoTokenizer, CLIPModel, SiglipModel
    try:
        model = (CLIPModel if kind == Kind.HF_CLIP else SiglipModel).from_pretrained(args.model).eval()
        tokenizer = AutoTokenizer.from_pretrained(args.model)
    except Exception as e:  # whatever the files hold: one error line naming the model
        fail(f"cannot load {args.model} as {kind.value}: {e}")
    rows = []
    with torch.no_grad():
        for name in names:
            texts = [t.format(name) if isinstance(t, str) else t(name) for t in prompts]
            if kind == Kind.HF_CLIP:
                t = tokenizer(texts, padding=True, return_tensors="pt")
                e = model.get_text_features(input_ids=t["input_ids"], attention_mask=t["attention_mask"])
            else:
                e = model.get_text_features(input_ids=tokenizer(texts, padding="max_length", return_tensors="pt")["input_ids"])
            e = torch.nn.functional.normalize(e, dim=-1).mean(dim=0)
            rows.append(e / e.norm())
    meta = {"logit_scale": repr(float(model.logit_scale.exp())), "activation": "softmax"}
    if kind == Kind.HF_SIGLIP:
        meta.update({"logit_bias": repr(float(model.logit_bias)), "activation": "sigmoid"})
    return torch.stack(rows), meta


def openclip_config(args):
    """model_cfg of an OpenCLIP folder's open_clip_config.json, checked for what this script builds."""
    path = os.path.join(args.model, "open_clip_config.json")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not a JSON config: {e}")
    cfg = cfg.get("model_cfg") if isinstance(cfg, dict) else None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("text_cfg", {}), dict):
        fail(f"{path}: not an OpenCLIP config (no model_cfg object with a text_cfg)")
    if "hf_model_name" in cfg.get("text_cfg", {}):
        fail(f"{args.model}: a text tower from Hugging Face (text_cfg.hf_model_name): not supported")
    if "embed_dim" not in cfg:
        fail(f"{path}: model_cfg.embed_dim is missing")
    return cfg


class TextTower:
    """CustomTextCLIP.encode_text without the image tower (a timm trunk is built by timm at its full size, which a
    checkpoint of a shrunk one would not fit): open_clip's own TextTransformer, loaded from the `text.*` tensors."""

    def __init__(self, cfg, state):
        import open_clip
        self.text = open_clip.model._build_text_tower(cfg["embed_dim"], cfg["text_cfg"], cfg.get("quick_gelu", False))
        text = {k[len("text."):]: v for k, v in state.items() if k.startswith("text.")}
        self.text.load_state_dict(text)
        self.text.eval()
        self.logit_scale = state["logit_scale"]
        self.logit_bias = state.get("logit_bias")

    def encode_text(self, tokens, normalize=False):
        import torch
        features = self.text(tokens)
        return torch.nn.functional.normalize(features, dim=-1) if normalize else features


def openclip_tokenizer(args, cfg):
    """open_clip.get_tokenizer's choice for a folder's config: the Hugging Face tokenizer it names (from
    --tokenizer DIR, else the folder's own files, else the hub), else CLIP's own BPE."""
    import open_clip
    text_cfg = cfg.get("text_cfg", {})
    context_length = text_cfg.get("context_length", 77)
    if not text_cfg.get("hf_tokenizer_name"):
        if args.tokenizer:
            fail(f"--tokenizer: {args.model} uses open_clip's own tokenizer (its config names no hf_tokenizer_name)")
        return open_clip.tokenizer.SimpleTokenizer(context_length=context_length)
    source = args.tokenizer or (args.model if os.path.exists(os.path.join(args.model, "tokenizer_config.json"))
                                else text_cfg["hf_tokenizer_name"])
    try:
        return open_clip.tokenizer.HFTokenizer(source, context_length=context_length,
                                               **text_cfg.get("tokenizer_kwargs", {}))
    except Exception as e:  # offline, or not a tokenizer folder
        hint = "" if args.tokenizer else " (give a local copy of it with --tokenizer DIR)"
        fail(f"cannot load the tokenizer {source}{hint}: {e}")


def openclip_classifier(args, kind, names, prompts):
    import torch
    import open_clip
    from safetensors.torch import load_file
    try:
        if kind == Kind.OPENCLIP_FOLDER:
            cfg = openclip_config(args)
            tokenizer = openclip_tokenizer(args, cfg)
            state = load_file(os.path.join(args.model, "open_clip_model.safetensors"))
            if cfg.get("custom_text"):
                model = TextTower(cfg, state)
            else:
                model = open_clip.CLIP(**cfg)
                model.load_state_dict(state)
        else:
            model = open_clip.create_model(args.model, pretrained=args.pretrained)
            tokenizer = open_clip.get_tokenizer(args.model)
    except SystemExit:
        raise
    except Exception as e:  # whatever the files hold: one error line naming the model
        fail(f"cannot load {args.model} as {kind.value}: {e}")
    if isinstance(model, torch.nn.Module):
        model.eval()
    with torch.no_grad():
        text = open_clip.build_zero_shot_classifier(model, tokenizer, names, prompts).T  # [C, E]
    meta = {"logit_scale": repr(float(model.logit_scale.exp())), "activation": "softmax"}
    if getattr(model, "logit_bias", None) is not None:  # SigLIP: each class's sigmoid
        meta.update({"logit_bias": repr(float(model.logit_bias)), "activation": "sigmoid"})
    return text, meta


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--model", required=True,
                   help="an OpenCLIP folder, a Hugging Face CLIPModel or SiglipModel folder, or an open_clip model "
                        "name with --pretrained")
    p.add_argument("--pretrained", help="the weights file for an open_clip model name")
    p.add_argument("--tokenizer", metavar="DIR",
                   help="a Hugging Face tokenizer folder for an OpenCLIP model whose config names one on the hub "
                        "(the SigLIP models'); default: the model folder's own, else the hub")
    p.add_argument("--classes", help="a file of class names, one per line (UTF-8)")
    p.add_argument("--templates", choices=sorted(TEMPLATE_NAMES), metavar="NAME",
                   help="; ".join(f"{k}: {v}" for k, v in TEMPLATE_NAMES.items() if v))
    p.add_argument("-o", "--out", required=True, metavar="FILE",
                   help="the .safetensors file to write; an existing file is replaced only when it is a "
                        "text-embeddings file (or with --force)")
    p.add_argument("--force", action="store_true", help="replace -o FILE whatever it holds")
    p.add_argument("names", nargs="*", help="class names (or --classes)")
    args = p.parse_args()
    # Everything that can be wrong with the input, before any model is loaded.
    names = class_names(args)
    check_output(args.out, args.force)
    kind = model_kind(args)
    if args.tokenizer and kind != Kind.OPENCLIP_FOLDER:
        fail(f"--tokenizer goes with an OpenCLIP model folder, not with {kind.value}")
    if args.tokenizer and not os.path.isdir(args.tokenizer):
        fail(f"--tokenizer {args.tokenizer}: no such folder")
    prompts = templates(args.templates or ("openai" if kind in OPENCLIP else "transformers"))

    import torch
    from safetensors.torch import save_file
    classifier = openclip_classifier if kind in OPENCLIP else hf_classifier
    text, meta = classifier(args, kind, names, prompts)
    meta.update({"labels": json.dumps(names), "templates": str(len(prompts)), "model": args.model})
    partial = os.path.join(os.path.dirname(os.path.abspath(args.out)), f".{os.path.basename(args.out)}.partial")
    try:
        save_file({"text_embeddings": text.contiguous().to(torch.float32)}, partial, metadata=meta)
        os.replace(partial, args.out)
    except OSError as e:
        fail(f"-o {args.out}: {e.strerror}")
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    print(f"{args.out}: {len(names)} classes, width {text.shape[1]}, logit scale {float(meta['logit_scale']):.4g}, "
          f"{meta['activation']}")


if __name__ == "__main__":
    main()
