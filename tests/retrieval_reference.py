"""The reference side of the text-to-photo retrieval test (tests/test_text_cli.cpp): open_clip's own ranking of the
photos for each query, on an OpenCLIP folder made by tests/make_text_models.py (open_clip.CLIP, random weights).
Run by the project's .venv Python.

  tests/retrieval_reference.py MODEL_DIR QUERIES.txt OUT.json PHOTO...

Each photo through open_clip's eval transform and encode_image, each query (a line) through its tokenizer and
encode_text, both normalized; OUT.json: {"photos": [...], "queries": [...], "top": [[photo index, ...] x 10 per query],
"scores": [[cosine, ...]]}, best first.
"""
import json
import sys

import open_clip
import torch
from PIL import Image
from safetensors.torch import load_file


def main():
    folder, queries_file, out, photos = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    with open(f"{folder}/open_clip_config.json") as f:
        cfg = json.load(f)["model_cfg"]
    model = open_clip.CLIP(**cfg).eval()
    model.load_state_dict({k: v.float() for k, v in load_file(f"{folder}/open_clip_model.safetensors").items()})
    with open(queries_file, encoding="utf-8") as f:
        queries = [line.rstrip("\n") for line in f]
    transform = open_clip.image_transform(model.visual.image_size, is_train=False)
    with torch.no_grad():
        images = torch.cat([model.encode_image(torch.stack([transform(Image.open(p).convert("RGB")) for p in
                                                           photos[i:i + 50]])) for i in range(0, len(photos), 50)])
        texts = model.encode_text(open_clip.tokenizer.SimpleTokenizer()(queries))
        cos = torch.nn.functional.normalize(texts, dim=-1) @ torch.nn.functional.normalize(images, dim=-1).T
    scores, top = cos.topk(10, dim=-1)
    with open(out, "w") as f:
        json.dump({"photos": photos, "queries": queries, "top": top.tolist(), "scores": scores.tolist()}, f)


if __name__ == "__main__":
    main()
