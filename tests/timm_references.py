"""timm's own outputs for a model on photos, through timm's data pipeline (resolve_data_config +
create_transform, PIL): the reference side the generators of test models (tests/make_timm_models.py,
tests/make_sweep_models.py) keep beside each model. They set TIMM_FUSED_ATTN before importing it."""
import torch
from PIL import Image
from timm.data import create_transform, resolve_data_config


def references(model, photos, size=None, keep_input=True):
    """input [N, 3, H, W] (unless keep_input is false), tokens (forward_features), embeddings
    (forward_head(pre_logits=True)) and outputs (model(x)), each contiguous f32. size: the input's side, else
    the model's own."""
    cfg = resolve_data_config({"input_size": (3, size, size)} if size else {}, model=model)
    transform = create_transform(**cfg)
    x = torch.stack([transform(Image.open(p).convert("RGB")) for p in photos])
    with torch.no_grad():
        tokens = model.forward_features(x)
        refs = {"input": x, "tokens": tokens, "embeddings": model.forward_head(tokens, pre_logits=True),
                "outputs": model(x)}
    if not keep_input:
        del refs["input"]
    return {k: v.contiguous().float() for k, v in refs.items()}
