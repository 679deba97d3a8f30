#!/usr/bin/env python3
"""open_clip's text tower timed as `vit bench --text` times the engine's: strings/s per batch size of prompts like
'a photo of a tench.', tokenizing included, on torch with the threads given. Reads an OpenCLIP folder
(open_clip_model.safetensors + open_clip_config.json + its tokenizer files), the layout the engine loads.

    .venv/bin/python scripts/text_bench_open_clip.py MODEL_DIR [--batch 1,32] [--threads 2] [--seconds 3]
"""
import argparse
import json
import os
import time

import open_clip
import torch
from safetensors.torch import load_file

NAMES = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead", "electric ray",
         "stingray", "cock", "hen", "ostrich", "brambling", "goldfinch"]


def load(folder):
    with open(os.path.join(folder, "open_clip_config.json")) as f:
        cfg = json.load(f)["model_cfg"]
    text_cfg = cfg.get("text_cfg", {})
    if cfg.pop("custom_text", False) or text_cfg.get("hf_tokenizer_name"):
        model = open_clip.CustomTextCLIP(**cfg)
    else:
        model = open_clip.CLIP(**cfg)
    state = load_file(os.path.join(folder, "open_clip_model.safetensors"))
    text = {k: v.float() for k, v in state.items() if not k.startswith("visual.")}  # the image tower is not timed
    missing, _ = model.load_state_dict(text, strict=False)
    if any(not k.startswith("visual.") for k in missing):
        raise SystemExit(f"{folder}: the text tower's tensors do not match its config")
    if text_cfg.get("hf_tokenizer_name"):
        tokenizer = open_clip.tokenizer.HFTokenizer(folder, context_length=text_cfg["context_length"],
                                                    **text_cfg.get("tokenizer_kwargs", {}))
    else:
        tokenizer = open_clip.tokenizer.SimpleTokenizer(context_length=text_cfg.get("context_length", 77))
    return model.eval(), tokenizer


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--batch", default="1,32")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    model, tokenizer = load(a.model)
    print(f"open_clip {open_clip.__version__}, torch {torch.__version__}, {a.threads} threads")
    print(f"{'batch':>6} {'strings/s':>10} {'p50 ms':>9}")
    with torch.inference_mode():
        for B in (int(b) for b in a.batch.split(",")):
            texts = [f"a photo of a {NAMES[i % 12]}." for i in range(B)]
            model.encode_text(tokenizer(texts))  # warm-up
            ms, start = [], time.perf_counter()
            while time.perf_counter() - start < a.seconds:
                t0 = time.perf_counter()
                model.encode_text(tokenizer(texts))
                ms.append((time.perf_counter() - t0) * 1e3)
            total = time.perf_counter() - start
            ms.sort()
            print(f"{B:>6} {B * len(ms) / total:>10.2f} {ms[len(ms) // 2]:>9.2f}")


if __name__ == "__main__":
    main()
