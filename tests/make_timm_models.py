"""Shrunk random-weight timm models of each ViT family, and timm's own outputs for them on real photos:
the reference side of tests/test_families.cpp. Run by the project's .venv Python (timm from
tests/requirements.txt over Debian's torch; scripts/setup.sh installs it); nothing it writes is committed.

  tests/make_timm_models.py OUT_DIR PHOTO...

OUT_DIR/<name>/model.safetensors, config.json   timm's hub layout, as timm.models.push_to_hf_hub writes it
                                                (save_for_hf: architecture, model_args, pretrained_cfg)
OUT_DIR/<name>/reference.safetensors            on the photos, through timm's data pipeline
                                                (resolve_data_config + create_transform, PIL):
    input      [N, 3, S, S]  what the model was fed
    tokens     [N, T, D]     model.forward_features(x)
    embeddings [N, E]        model.forward_head(tokens, pre_logits=True)
    outputs    [N, C]        model(x) (the logits, or for a model without a head its embedding)
    __metadata__ {"files": [...], "arch": "..."}
OUT_DIR/<name>/reference_224.safetensors        the same for the DINOv2 models run at 224 px: timm's model
                                                made at that size, its position table resampled from the
                                                518-px one by timm's checkpoint_filter_fn
OUT_DIR/<name>/reference_168.safetensors        the same for the EVA-02 models at 168 px (12x12 patches): the
                                                position table resampled, the rotary grid rebuilt for 12x12
OUT_DIR/beit/reference_256.safetensors          the same for BEiT at 256 px (16x16 patches): its relative
                                                position tables resized by timm's resize_rel_pos_bias_table
OUT_DIR/pe_core/reference_224.safetensors       the same for Perception Encoder at 224 px: the table resampled,
                                                the rotary grid 14x14 rescaled to its 24x24 ref_feat_shape
OUT_DIR/dinov3/reference_224.safetensors        the same for DINOv3 at 224 px (14x14 patches) and S+ at 192:
OUT_DIR/dinov3_plus/reference_192.safetensors   the same model (dynamic_img_size), its rotary grid the input's
OUT_DIR/aimv2/reference_168.safetensors         the same for AIMv2 at 168 px (12x12 patches), EVA-02 CLIP at 160
OUT_DIR/eva02_clip/reference_160.safetensors    (10x10): the position table resampled, EVA-02 CLIP's rotary grid
                                                rebuilt and rescaled to its 16x16 ref_feat_shape; the RoPE-Axial
OUT_DIR/vit_rope_{axial,ape,mixed}/ref..._160   ViTs and RoPE-Mixed at 160 px, their rotary grid 10x10
Every parameter is random, norms and layer scales around 1 and 0.5 rather than at their identity
values, so a step the engine skipped or got wrong changes the outputs.
"""
import json
import os
import sys

os.environ.setdefault("TIMM_FUSED_ATTN", "0")  # torch 1.13 has no F.scaled_dot_product_attention

import torch  # noqa: E402
import timm  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from timm.models import save_for_hf  # noqa: E402
from timm.models.beit import checkpoint_filter_fn as beit_filter_fn  # noqa: E402
from timm.models.eva import checkpoint_filter_fn as eva_filter_fn  # noqa: E402
from timm.models.vision_transformer import checkpoint_filter_fn  # noqa: E402
from timm_references import references  # noqa: E402

# name: (timm architecture, shrinking model_args). Two blocks, width 64: every family feature present.
SMALL = dict(embed_dim=64, depth=2, num_heads=2)
SPECS = {
    "vit": ("vit_base_patch16_224", dict(SMALL, num_classes=10)),
    "deit3": ("deit3_small_patch16_224", dict(SMALL, num_classes=10)),
    "dinov2": ("vit_small_patch14_dinov2", dict(SMALL)),
    "dinov2_reg": ("vit_small_patch14_reg4_dinov2", dict(SMALL)),
    "clip": ("vit_base_patch16_clip_224", dict(SMALL, num_classes=32)),
    "clip_quickgelu": ("vit_base_patch16_clip_quickgelu_224", dict(SMALL, num_classes=32)),
    "siglip": ("vit_base_patch16_siglip_224", dict(SMALL)),
    "beit": ("beit_base_patch16_224", dict(SMALL, num_classes=10)),
    "eva02": ("eva02_tiny_patch14_224", dict(SMALL)),
    "eva02_base": ("eva02_base_patch14_224", dict(SMALL, num_classes=10)),
    # eva.py's ViT with a rotary embedding and no position table, one register token, average pooling.
    "vit_rope": ("vit_base_patch16_rope_reg1_gap_256", dict(SMALL, num_classes=10)),
    # Perception Encoder (eva.py): runs from its config, refused without it (its tensors are a CLIP tower's with
    # an attention pool; its rotary embedding and its pool's 8 heads are in none).
    "pe_core": ("vit_pe_core_small_patch16_384", dict(SMALL, num_classes=16)),
    # DINOv3 (eva.py): rotary only (rotate-half, temperature 100, coordinates normalised to the grid), class and
    # 4 register tokens, layer scale; without q/k/v biases, with them (_qkvb), with a SwiGLU MLP (S+, aligned).
    "dinov3": ("vit_small_patch16_dinov3", dict(SMALL)),
    "dinov3_qkvb": ("vit_base_patch16_dinov3_qkvb", dict(SMALL, num_classes=10)),
    "dinov3_plus": ("vit_small_plus_patch16_dinov3", dict(SMALL)),
    # AIMv2 (vision_transformer.py): RMSNorm everywhere, also right after the patch embedding; a SwiGLU MLP; no
    # q/k/v, attn.proj or MLP biases; a position table and no class token; the mean of the tokens; no head.
    "aimv2": ("aimv2_large_patch14_224", dict(SMALL)),
    # EVA-02 CLIP (eva.py): EVA-02 base with a LayerNorm on attention's output (scale_attn_inner), the class
    # token, the projection head.
    "eva02_clip": ("eva02_base_patch16_clip_224", dict(SMALL, num_classes=16)),
    # Naver's RoPE-Axial ViTs (eva.py, AttentionRope): the rotary embedding with temperature 100 and 'xy' indexing,
    # no reference grid; no position table, or (_ape) one over the patches only; the class token, layer scale.
    "vit_rope_axial": ("vit_base_patch16_rope_224", dict(SMALL, num_classes=10)),
    "vit_rope_ape": ("vit_base_patch16_rope_ape_224", dict(SMALL, num_classes=10)),
    # RoPE-Mixed: the rotary frequencies learned per block and head (rope.freqs).
    "vit_rope_mixed": ("vit_base_patch16_rope_mixed_224", dict(SMALL, num_classes=10)),
    # What a checkpoint without its config.json needs: a post-norm ViT (ResPostBlock: a classic ViT's tensors) and a
    # Perception Encoder spatial tower (a CLIP tower's, its rotary embedding in none), both refused; timm's own
    # vit_small_patch16_224 shrunk in depth only, run with --arch naming it.
    "rpn": ("vit_base_patch16_rpn_224", dict(SMALL, num_classes=10)),
    "pe_spatial": ("vit_pe_spatial_tiny_patch16_512", dict(SMALL)),
    "vit_small_depth2": ("vit_small_patch16_224", dict(depth=2)),
}
# The models also referenced at another input size: (size, how the weights get there). "same": the model is
# dynamic (the rotary grid follows the input), run as it is; else timm's model made at that size, the
# weights through the family's checkpoint filter.
OTHER_SIZES = {
    "dinov2": (224, checkpoint_filter_fn),
    "dinov2_reg": (224, checkpoint_filter_fn),
    "eva02": (168, eva_filter_fn),
    "eva02_base": (168, eva_filter_fn),
    "beit": (256, beit_filter_fn),
    "pe_core": (224, eva_filter_fn),
    "dinov3": (224, "same"),
    "dinov3_plus": (192, "same"),
    "aimv2": (168, checkpoint_filter_fn),
    "eva02_clip": (160, eva_filter_fn),
    "vit_rope_axial": (160, eva_filter_fn),
    "vit_rope_ape": (160, eva_filter_fn),
    "vit_rope_mixed": (160, eva_filter_fn),
}


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf in ("gamma", "gamma_1", "gamma_2"):  # layer scales
                p.copy_(0.5 + 0.2 * torch.randn(p.shape, generator=g))
            elif leaf == "freqs":  # learned rotary frequencies: near their own values
                noise = torch.randn(p.shape, generator=g)
                p.copy_(p * (1.0 + 0.2 * noise) + 0.05 * noise)
            elif p.dim() == 1 and "norm" in name and leaf == "weight":
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(("cls_token", "reg_token", "pos_embed", "relative_position_bias_table")):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_((1.0 / p[0].numel()) ** 0.5 * torch.randn(p.shape, generator=g))


def main():
    out, photos = sys.argv[1], sys.argv[2:]
    for seed, (name, (arch, args)) in enumerate(SPECS.items()):
        model = timm.create_model(arch, pretrained=False, **args).eval()
        randomize(model, seed)
        d = os.path.join(out, name)
        save_for_hf(model, d, model_args=args, safe_serialization=True)
        refs = references(model, photos)
        save_file(refs, os.path.join(d, "reference.safetensors"),
                  metadata={"files": json.dumps(photos), "arch": arch})
        print(name, arch, {k: tuple(v.shape) for k, v in refs.items()})
        if name in OTHER_SIZES:
            size, filter_fn = OTHER_SIZES[name]
            small = model
            if filter_fn != "same":
                small = timm.create_model(arch, pretrained=False, **dict(args, img_size=size)).eval()
                small.load_state_dict(filter_fn(model.state_dict(), small))
            refs = references(small, photos, size)
            save_file(refs, os.path.join(d, f"reference_{size}.safetensors"),
                      metadata={"files": json.dumps(photos), "arch": arch})


if __name__ == "__main__":
    main()
