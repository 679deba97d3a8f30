"""Every architecture timm lists from vision_transformer.py, eva.py, beit.py and deit.py as a shrunk random-weight
model, with timm's own outputs for it on real photos: the reference side of tests/test_sweep.cpp (which
models the engine runs, and that it never answers wrongly) and of the family tests of the newer families.
Run by the project's .venv Python (timm from tests/requirements.txt over Debian's torch); nothing it writes
is committed.

  tests/make_sweep_models.py OUT_DIR PHOTO...

OUT_DIR/<arch>/model.safetensors, config.json   timm's hub layout (save_for_hf: architecture, model_args,
                                                pretrained_cfg), F32
OUT_DIR/<arch>/reference.safetensors            on the photos, through timm's data pipeline
                                                (resolve_data_config + create_transform, PIL; the input
                                                tensor itself is not kept: 240 of them would take 1 GB):
    tokens     [N, T, D]     model.forward_features(x)
    embeddings [N, E]        model.forward_head(tokens, pre_logits=True)
    outputs    [N, C]        model(x) (the logits, or for a model without a head its embedding)
OUT_DIR/<arch>/reference_<S>.safetensors        the same at S x S for the architectures of OTHER_SIZES:
                                                the same weights in timm's model made at that size
OUT_DIR/sweep.json                              per architecture: the shrinking model_args; timm's model at
                                                full size (on the meta device: parameters, width, depth,
                                                heads, MLP width, patch, input size, LayerNorm eps, MLP
                                                activation, classes); timm's error where timm itself cannot
                                                build or run it here
OUT_DIR/timm_archs.inc                          what each architecture's name brings, for models/timm_archs.inc
                                                (arch_facts; naflexvit's names too): its shape and structure as
                                                its tensors show them, global_pool, default preprocessing

Shrinking: width 64, depth 2, 2 heads, at most 16 classes; the architecture's own image size, patch size,
MLP ratio and every other setting. A few need their own recipe (RECIPES). Every parameter is random,
norms, layer scales and learned frequencies around their working values rather than at identity, so a
step the engine skipped or got wrong changes the outputs.
"""
import json
import os
import sys
import zlib

os.environ.setdefault("TIMM_FUSED_ATTN", "0")  # torch 1.13 has no F.scaled_dot_product_attention

import torch  # noqa: E402
import timm  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from timm.models import save_for_hf  # noqa: E402
from timm_references import references  # noqa: E402

MODULES = ("vision_transformer", "eva", "beit", "deit")
# Modules whose architectures only models/timm_archs.inc lists (their tests make their own models).
FACTS_ONLY_MODULES = ("naflexvit",)
SMALL = dict(embed_dim=64, depth=2, num_heads=2)
# Names whose own settings do not shrink to SMALL: timm asserts on them.
RECIPES = {
    # SwiGLUPacked with mlp_ratio 16/3 needs an even hidden width: int(48 * 5.33334) = 256.
    "vit_giant_patch14_dinov2": dict(SMALL, embed_dim=48),
    "vit_giant_patch14_reg4_dinov2": dict(SMALL, embed_dim=48),
    "vit_giant_patch14_reg1_tipsv2": dict(SMALL, embed_dim=48),
    # Sapiens2 names each block's key/value heads (grouped-query attention in the middle blocks).
    **{f"vit_{s}_patch16_sapiens2": dict(SMALL, num_kv_heads=(2, 1)) for s in ("base", "large", "huge", "giant", "5b")},
}
# Architectures also referenced at another input size (timm's model made at that size, the same weights
# through the family's checkpoint filter).
OTHER_SIZES = {}


def architectures():
    return sorted({n for m in MODULES for n in timm.list_models(module=m)})


def recipe(name):
    args = dict(RECIPES.get(name, SMALL))
    classes = timm.models.get_pretrained_cfg(name).num_classes if timm.models.get_pretrained_cfg(name) else 1000
    if classes > 16:
        args["num_classes"] = 16
    return args


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            noise = torch.randn(p.shape, generator=g)
            if leaf in ("gamma", "gamma_1", "gamma_2"):  # layer scales
                p.copy_(0.5 + 0.2 * noise)
            elif leaf == "freqs":  # learned rotary frequencies: near their own values
                p.copy_(p * (1.0 + 0.2 * noise) + 0.05 * noise)
            elif p.dim() == 1 and leaf == "weight":  # LayerNorm and RMSNorm scales
                p.copy_(1.0 + 0.1 * noise)
            elif p.dim() == 1:
                p.copy_(0.1 * noise)
            elif leaf in ("cls_token", "reg_token", "pos_embed", "relative_position_bias_table", "latent"):
                p.copy_(0.5 * noise)
            else:
                p.copy_((1.0 / p[0].numel()) ** 0.5 * noise)


def full_size(name):
    """timm's model at its own size, built on the meta device (no memory): what `vit bench --arch` must match."""
    m = timm.create_model(name, pretrained=False, device="meta")
    block = m.blocks[0]
    attn, mlp = getattr(block, "attn", None), getattr(block, "mlp", None)
    fc2 = getattr(mlp, "fc2", None)
    norm = getattr(block, "norm1", None)
    return {"parameters": sum(p.numel() for p in m.parameters()), "width": m.embed_dim, "depth": len(m.blocks),
            "heads": getattr(attn, "num_heads", None), "mlp": getattr(fc2, "in_features", None),
            "patch": m.patch_embed.patch_size[0], "img_size": list(m.patch_embed.img_size),
            "eps": getattr(norm, "eps", None), "act": type(getattr(mlp, "act", None)).__name__,
            "classes": m.num_classes}


def arch_facts(name):
    """What an architecture's name brings (models/timm_archs.inc): timm's create_model(name) on the meta device,
    its shape and structure read from its tensors' names and shapes as the engine reads a checkpoint's, its
    global_pool, and its default pretrained config's tag, classes (a CLIP tower's: its projection, unless the tag
    says fine-tuned) and eval preprocessing."""
    m = timm.create_model(name, pretrained=False, device="meta")
    sd = {k: list(v.shape) for k, v in m.state_dict().items()}
    naflex = "embeds.proj.weight" in sd
    e = "embeds." if naflex else ""
    b = "blocks.0."
    patch = (m.embeds if naflex else m.patch_embed).patch_size[0]
    width = sd[e + "proj.weight" if naflex else "patch_embed.proj.weight"][0]
    if b + "mlp.fc1_g.weight" in sd:
        mlp, swiglu = sd[b + "mlp.fc1_g.weight"][0], True
    else:
        mlp = sd[b + "mlp.fc2.weight"][1]
        swiglu = sd[b + "mlp.fc1.weight"][0] == 2 * mlp
    cfg = m.pretrained_cfg
    reg = sd[e + "reg_token"][1] if e + "reg_token" in sd else 0
    prefix = (e + "cls_token" in sd) + reg + ("dist_token" in sd)
    grid = list(m.embeds.pos_embed_grid_size if naflex else m.patch_embed.grid_size)
    pos = sd.get(e + "pos_embed")
    if pos and naflex:
        grid = pos[1:3]
    elif pos:
        grid = [round((pos[1] - prefix) ** 0.5)] * 2
        if grid[0] ** 2 != pos[1] - prefix:
            grid = [round(pos[1] ** 0.5)] * 2
    has = {
        "class_token": e + "cls_token" in sd, "dist_token": "dist_token" in sd, "pos_embed": pos is not None,
        "no_embed_class": pos is not None and not naflex and prefix > 0 and pos[1] == grid[0] * grid[1],
        "layer_scale": b + "ls1.gamma" in sd or b + "gamma_1" in sd, "norm_pre": "norm_pre.weight" in sd,
        "final_norm": "norm.weight" in sd, "fc_norm": "fc_norm.weight" in sd,
        "qkv_bias": any(b + "attn." + t in sd for t in ("qkv.bias", "q_bias", "q_proj.bias")),
        "k_bias": b + "attn.qkv.bias" in sd or b + "attn.k_proj.bias" in sd,
        "qkv_fused": b + "attn.q_proj.weight" not in sd, "proj_bias": b + "attn.proj.bias" in sd,
        "patch_bias": e + "proj.bias" in sd if naflex else "patch_embed.proj.bias" in sd,
        "patch_norm": "patch_embed.norm.weight" in sd, "attn_norm": b + "attn.norm.weight" in sd,
        "mlp_norm": b + "mlp.norm.weight" in sd, "swiglu": swiglu,
    }
    rel = sd.get(b + "attn.relative_position_bias_table")
    return {
        "arch": name, "width": width, "depth": len(m.blocks), "heads": m.blocks[0].attn.num_heads, "mlp": mlp,
        "patch": patch, "grid": grid, "reg_tokens": reg,
        "rel_pos_window": (round((rel[0] - 3) ** 0.5) + 1) // 2 if rel else 0,
        "attn_pool_mlp": sd["attn_pool.mlp.fc1.weight"][0] if "attn_pool.mlp.fc1.weight" in sd else 0,
        "classes": cfg.get("num_classes", m.num_classes), "tag": cfg.get("tag") or "", "pool": m.global_pool,
        "has": [k for k, v in has.items() if v],
        "input_size": list(cfg["input_size"][1:]), "mean": [round(float(x), 8) for x in cfg["mean"]],
        "std": [round(float(x), 8) for x in cfg["std"]], "crop_pct": cfg.get("crop_pct", 0.875),
        "crop_mode": cfg.get("crop_mode", "center"), "interpolation": cfg.get("interpolation", "bicubic"),
    }


def write_arch_table(path, facts):
    """models/timm_archs.inc: one JSON object per architecture, as a C++ raw string literal."""
    with open(path, "w") as f:
        f.write(f"// What timm {timm.__version__}'s architectures are (tests/make_sweep_models.py's arch_facts): generated, "
                "checked by\n// tests/test_sweep.cpp; `VIT_UPDATE_MODELS_MD=1 ctest -L sweep` rewrites it.\n"
                "R\"json([\n")
        f.write(",\n".join(json.dumps(x, separators=(",", ":")) for x in facts))
        f.write("\n])json\"\n")


def make(name, args, out, photos):
    model = timm.create_model(name, pretrained=False, **args).eval()
    randomize(model, zlib.crc32(name.encode()))
    d = os.path.join(out, name)
    refs = references(model, photos, keep_input=False)
    save_for_hf(model, d, safe_serialization=True)
    meta = {"files": json.dumps(photos), "arch": name}
    save_file(refs, os.path.join(d, "reference.safetensors"), metadata=meta)
    for size in OTHER_SIZES.get(name, ()):
        other = timm.create_model(name, pretrained=False, **dict(args, img_size=size)).eval()
        other.load_state_dict(model.state_dict())
        save_file(references(other, photos, size, keep_input=False), os.path.join(d, f"reference_{size}.safetensors"),
                  metadata=meta)


def main():
    out, photos = sys.argv[1], sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    index = {}
    for name in architectures():
        args = recipe(name)
        index[name] = {"model_args": {k: list(v) if isinstance(v, tuple) else v for k, v in args.items()}}
        try:
            index[name]["full"] = full_size(name)
        except Exception as e:  # a block without attn or mlp (parallel blocks): no facts to compare
            index[name]["full_error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        try:
            make(name, args, out, photos)
        except Exception as e:  # timm itself cannot build or run it here: recorded, the sweep says so
            index[name]["timm_error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        print(name, "timm error: " + index[name]["timm_error"] if "timm_error" in index[name] else "", flush=True)
    facts = []
    for name in architectures() + timm.list_models(module=FACTS_ONLY_MODULES):
        try:
            facts.append(arch_facts(name))
        except Exception as e:  # parallel blocks and other structures the table has no words for
            print(name, "no facts:", f"{type(e).__name__}: {e}".splitlines()[0][:300], flush=True)
    write_arch_table(os.path.join(out, "timm_archs.inc"), facts)
    with open(os.path.join(out, "sweep.json"), "w") as f:
        json.dump({"timm": timm.__version__, "torch": torch.__version__, "architectures": index}, f, indent=1)


if __name__ == "__main__":
    main()
