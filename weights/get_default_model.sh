#!/usr/bin/env bash
# Obtains the default model, DeiT-Tiny/16 trained on ImageNet-1k (timm's deit_tiny_patch16_224.fb_in1k),
# into weights/deit_tiny_patch16_224.fb_in1k/ (model.safetensors + config.json, git-ignored): from
# ../shared/data/models/ beside the repository where that folder exists, else from the Hugging Face hub.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
name=deit_tiny_patch16_224.fb_in1k
dest="$here/$name"
shared="$(cd "$here/../.." && pwd)/shared/data/models/$name"
if [ -s "$dest/model.safetensors" ] && [ -s "$dest/config.json" ]; then
  echo "default model present: $dest"
  exit 0
fi
mkdir -p "$dest"
if [ -d "$shared" ]; then
  cp "$shared/model.safetensors" "$shared/config.json" "$dest/"
  echo "default model copied from $shared"
else
  hub="https://huggingface.co/timm/$name/resolve/main"
  for f in model.safetensors config.json; do
    curl -fL --retry 3 -o "$dest/$f.part" "$hub/$f"
    mv "$dest/$f.part" "$dest/$f"
  done
  echo "default model downloaded from $hub"
fi
