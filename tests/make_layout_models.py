"""Shrunk random-weight models in the layouts other than timm's, made by each layout's own code, and that code's
outputs for them on real photos: the reference side of tests/test_layouts.cpp. Run by the project's .venv Python
(transformers, open_clip_torch and sentencepiece from tests/requirements.txt over Debian's torch); nothing it
writes is committed.

  tests/make_layout_models.py OUT_DIR PHOTO...

OUT_DIR/hf_dinov2, hf_dinov2_reg   Hugging Face Dinov2Model / Dinov2WithRegistersModel (save_pretrained:
                                   model.safetensors, config.json, preprocessor_config.json), made at 518 px
OUT_DIR/hf_clip                    Hugging Face CLIPVisionModelWithProjection (QuickGELU, as OpenAI's)
OUT_DIR/hf_clip_full               a whole Hugging Face CLIPModel (its vision_config leaves its defaults out), with a
                                   CLIPTokenizer of CLIP's own vocabulary
OUT_DIR/hf_siglip                  Hugging Face SiglipVisionModel (tanh GELU, the attention-pool head)
OUT_DIR/hf_siglip_384              the same at 384 px in patches of 14, as google/siglip-so400m-patch14-384
OUT_DIR/hf_siglip_full             a whole Hugging Face SiglipModel, image and text towers, with a SiglipTokenizer
                                   whose sentencepiece model is trained here on the prompts
OUT_DIR/openclip, openclip_quickgelu  OpenCLIP CLIP models, image and text towers (open_clip_model.safetensors,
                                   open_clip_config.json, as open_clip's save_for_hf writes them)
OUT_DIR/oc_siglip_b16, oc_eva02_b16, oc_so400m, oc_siglip2_b32  OpenCLIP 2.32's ViT-B-16-SigLIP, EVA02-B-16,
                                   ViT-SO400M-14-SigLIP-384 and ViT-B-32-SigLIP2-256 (CustomTextCLIP, the image tower
                                   a timm trunk stored as visual.trunk.*, open_clip_config.json naming it), made by
                                   open_clip.create_model with the trunk shrunk (its heads, patch, input size and the
                                   rest of its architecture kept) and the text tower shrunk
OUT_DIR/siglip_tokenizer           a Hugging Face tokenizer folder for the SigLIP towers (sentencepiece trained on the
                                   prompts), as the hub's timm/ViT-B-16-SigLIP holds one
OUT_DIR/<name>/reference.safetensors  on the photos, through the layout's own image processor:
    input      [N, 3, S, S]  what the model was fed
    tokens     [N, T, D]     the token sequence the layout returns (Hugging Face: last_hidden_state;
                             OpenCLIP: after ln_post)
    embeddings [N, E]        the pooled features before any projection (Hugging Face: pooler_output)
    outputs    [N, C]        with a projection, the image embedding (image_embeds, encode_image), else
                             the embeddings again
OUT_DIR/hf_dinov2*/reference_518.safetensors  the same at the model's own 518 px
OUT_DIR/hf_siglip_384/reference_336.safetensors  at 336 px, interpolate_pos_encoding=True
OUT_DIR/hf_clip, hf_siglip, openclip/reference_288.safetensors  at 288 px: Hugging Face's models called with
                                   interpolate_pos_encoding=True, OpenCLIP's made at 288 and loaded through its
                                   resize_pos_embed
OUT_DIR/oc_*/reference_<size>.safetensors  at another size (288, 256, 336, 320): the trunk made by timm at that
                                   size, the checkpoint through timm's own checkpoint_filter_fn
OUT_DIR/open_clip_configs.json     the vision_cfg of every open_clip config named ViT-*-SigLIP2* or EVA02-L-14*
OUT_DIR/openclip*, oc_*, hf_clip_full, hf_siglip_full/classes.safetensors  scripts/export_text_embeddings.py's file for
                                   a few class names, and in reference.safetensors `zero_shot` [N, classes]: the
                                   library's own zero-shot probabilities, open_clip's softmax(logit_scale.exp() *
                                   image_features @ classifier), CLIPModel's softmax(logits_per_image),
                                   SiglipModel's sigmoid(logits_per_image)
Every parameter is random, norms and layer scales around 1 and 0.5 rather than at their identity values.
"""
import fnmatch
import gzip
import io
import json
import os
import pathlib
import subprocess
import sys

import sentencepiece
import timm
import torch
import open_clip
from open_clip.push_to_hf_hub import save_config_for_hf
from PIL import Image
from safetensors.torch import save_file
from transformers import (AutoTokenizer, BitImageProcessor, CLIPConfig, CLIPImageProcessor, CLIPModel,
                          CLIPTokenizer, CLIPVisionConfig, CLIPVisionModelWithProjection,
                          Dinov2Config, Dinov2Model, Dinov2WithRegistersConfig, Dinov2WithRegistersModel,
                          SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipTokenizer, SiglipVisionConfig,
                          SiglipVisionModel)

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORT = os.path.join(HERE, "..", "scripts", "export_text_embeddings.py")
SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2)
CLASSES = ["tench", "Siamese cat", "airliner", "goldfish", "golden retriever"]


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf, parent = name.rsplit(".", 1)[-1], (name.split(".")[-2:-1] or [""])[0]
            if leaf in ("gamma", "lambda1"):  # layer scales
                p.copy_(0.5 + 0.2 * torch.randn(p.shape, generator=g))
            elif leaf == "logit_scale":
                p.fill_(2.0 + torch.rand((), generator=g).item())
            elif p.dim() == 1 and ("norm" in name or parent.startswith("ln")) and leaf == "weight":
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() <= 1 and leaf != "class_embedding":
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif leaf in ("cls_token", "register_tokens", "class_embedding", "position_embeddings", "probe", "pos_embed",
                          "reg_token", "latent"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_((1.0 / p[0].numel()) ** 0.5 * torch.randn(p.shape, generator=g))


def hf_input(processor, photos):
    return processor([Image.open(p).convert("RGB") for p in photos], return_tensors="pt")["pixel_values"]


def save_refs(d, file, refs, photos, layout):
    refs = {k: v.float().contiguous().clone() for k, v in refs.items()}
    save_file(refs, os.path.join(d, file), metadata={"files": json.dumps(photos), "layout": layout})
    print(os.path.basename(d), file, {k: tuple(v.shape) for k, v in refs.items()})


def dinov2(out, photos, name, seed, registers):
    cfg = dict(SMALL, mlp_ratio=4, image_size=518, patch_size=14)
    model = (Dinov2WithRegistersModel(Dinov2WithRegistersConfig(num_register_tokens=4, **cfg)) if registers
             else Dinov2Model(Dinov2Config(**cfg))).eval()
    randomize(model, seed)
    d = os.path.join(out, name)
    model.save_pretrained(d, safe_serialization=True)
    # facebook/dinov2-*'s processor: shorter side 256, bicubic, center crop 224, ImageNet mean and std; so the
    # model runs at 224 and its 37 x 37 position table is resampled by the model's own code.
    processor = BitImageProcessor(size={"shortest_edge": 256}, crop_size={"height": 224, "width": 224},
                                  do_center_crop=True, resample=3, image_mean=[0.485, 0.456, 0.406],
                                  image_std=[0.229, 0.224, 0.225])
    processor.save_pretrained(d)
    for file, proc in (("reference.safetensors", processor),
                       ("reference_518.safetensors", BitImageProcessor(
                           size={"shortest_edge": 592}, crop_size={"height": 518, "width": 518}, do_center_crop=True,
                           resample=3, image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]))):
        x = hf_input(proc, photos)
        with torch.no_grad():
            o = model(pixel_values=x)
        save_refs(d, file, {"input": x, "tokens": o.last_hidden_state, "embeddings": o.pooler_output,
                            "outputs": o.pooler_output}, photos, type(model).__name__)


def hf_clip(out, photos, seed):
    model = CLIPVisionModelWithProjection(CLIPVisionConfig(
        intermediate_size=256, image_size=224, patch_size=16, projection_dim=32, hidden_act="quick_gelu",
        **SMALL)).eval()
    randomize(model, seed)
    d = os.path.join(out, "hf_clip")
    model.save_pretrained(d, safe_serialization=True)
    processor = CLIPImageProcessor()  # openai/clip-vit-*'s: shorter side 224, bicubic, crop 224, CLIP mean/std
    processor.save_pretrained(d)
    x = hf_input(processor, photos)
    with torch.no_grad():
        o = model(pixel_values=x)
        v = model.vision_model(pixel_values=x)
    save_refs(d, "reference.safetensors", {"input": x, "tokens": v.last_hidden_state, "embeddings": v.pooler_output,
                                           "outputs": o.image_embeds}, photos, type(model).__name__)
    x = hf_input(CLIPImageProcessor(size={"shortest_edge": 288}, crop_size={"height": 288, "width": 288}), photos)
    with torch.no_grad():
        o = model(pixel_values=x, interpolate_pos_encoding=True)
        v = model.vision_model(pixel_values=x, interpolate_pos_encoding=True)
    save_refs(d, "reference_288.safetensors", {"input": x, "tokens": v.last_hidden_state,
                                               "embeddings": v.pooler_output, "outputs": o.image_embeds},
              photos, type(model).__name__)


def hf_clip_full(out, photos, seed):
    small = dict(SMALL, intermediate_size=256)
    model = CLIPModel(CLIPConfig(text_config=small, vision_config=dict(small, image_size=224, patch_size=16),
                                 projection_dim=32)).eval()
    randomize(model, seed)
    d = os.path.join(out, "hf_clip_full")
    model.save_pretrained(d, safe_serialization=True)
    CLIPImageProcessor().save_pretrained(d)
    clip_tokenizer(d)
    x = hf_input(CLIPImageProcessor(), photos)
    subprocess.run([sys.executable, EXPORT, "--model", d, "-o", os.path.join(d, "classes.safetensors"), *CLASSES],
                   check=True)
    # CLIPModel's own zero-shot: its logits_per_image through a softmax, one prompt per class as transformers'
    # zero-shot pipeline words and pads it.
    texts = AutoTokenizer.from_pretrained(d)([f"This is a photo of {c}." for c in CLASSES], padding=True,
                                             return_tensors="pt")
    with torch.no_grad():
        v = model.vision_model(pixel_values=x)
        image_embeds = model.get_image_features(pixel_values=x)
        zero_shot = model(input_ids=texts["input_ids"], attention_mask=texts["attention_mask"],
                          pixel_values=x).logits_per_image.softmax(dim=-1)
    save_refs(d, "reference.safetensors", {"input": x, "tokens": v.last_hidden_state, "embeddings": v.pooler_output,
                                           "outputs": image_embeds, "zero_shot": zero_shot}, photos,
              type(model).__name__)


def clip_tokenizer(d):
    """CLIP's own BPE vocabulary (OpenAI's merges, which open_clip ships) written into d as the files of a
    Hugging Face CLIPTokenizer, as openai/clip-vit-* hold them."""
    with gzip.open(open_clip.tokenizer.default_bpe()) as f:
        merges = f.read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
    symbols = list(open_clip.tokenizer.bytes_to_unicode().values())
    vocab = symbols + [s + "</w>" for s in symbols] + ["".join(m.split()) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({v: i for i, v in enumerate(vocab)}, f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    CLIPTokenizer(os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt")).save_pretrained(d)


def hf_siglip(out, photos, seed):
    model = SiglipVisionModel(SiglipVisionConfig(intermediate_size=256, image_size=224, patch_size=16,
                                                 hidden_act="gelu_pytorch_tanh", **SMALL)).eval()
    randomize(model, seed)
    d = os.path.join(out, "hf_siglip")
    model.save_pretrained(d, safe_serialization=True)
    processor = SiglipImageProcessor()  # google/siglip-*'s: 224 x 224, bicubic, mean and std 0.5
    processor.save_pretrained(d)
    x = hf_input(processor, photos)
    with torch.no_grad():
        o = model(pixel_values=x)
    save_refs(d, "reference.safetensors", {"input": x, "tokens": o.last_hidden_state, "embeddings": o.pooler_output,
                                           "outputs": o.pooler_output}, photos, type(model).__name__)
    x = hf_input(SiglipImageProcessor(size={"height": 288, "width": 288}), photos)
    with torch.no_grad():
        o = model(pixel_values=x, interpolate_pos_encoding=True)
    save_refs(d, "reference_288.safetensors", {"input": x, "tokens": o.last_hidden_state,
                                               "embeddings": o.pooler_output, "outputs": o.pooler_output},
              photos, type(model).__name__)


def hf_siglip_384(out, photos, seed):
    """As google/siglip-so400m-patch14-384: 384 px in patches of 14 (27 x 27, the last 6 pixels of each side unread
    by the patch embedding's convolution); at 336 px through interpolate_pos_encoding."""
    model = SiglipVisionModel(SiglipVisionConfig(intermediate_size=239, image_size=384, patch_size=14,
                                                 hidden_act="gelu_pytorch_tanh", **SMALL)).eval()
    randomize(model, seed)
    d = os.path.join(out, "hf_siglip_384")
    model.save_pretrained(d, safe_serialization=True)
    processor = SiglipImageProcessor(size={"height": 384, "width": 384})
    processor.save_pretrained(d)
    for size, file, interpolate in ((384, "reference.safetensors", False), (336, "reference_336.safetensors", True)):
        x = hf_input(SiglipImageProcessor(size={"height": size, "width": size}), photos)
        with torch.no_grad():
            o = model(pixel_values=x, interpolate_pos_encoding=interpolate)
        save_refs(d, file, {"input": x, "tokens": o.last_hidden_state, "embeddings": o.pooler_output,
                            "outputs": o.pooler_output}, photos, type(model).__name__)


def siglip_tokenizer(d, prompts):
    """A SiglipTokenizer whose sentencepiece model is trained here on the prompts (no download needed)."""
    os.makedirs(d, exist_ok=True)
    spm = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(prompts * 20), model_writer=spm, vocab_size=48, model_type="unigram",
        hard_vocab_limit=False, minloglevel=2)
    with open(os.path.join(d, "spiece.model"), "wb") as f:
        f.write(spm.getvalue())
    tokenizer = SiglipTokenizer(vocab_file=os.path.join(d, "spiece.model"))
    tokenizer.save_pretrained(d)
    return tokenizer


def hf_siglip_full(out, photos, seed):
    vision = dict(SMALL, intermediate_size=256, image_size=224, patch_size=16, hidden_act="gelu_pytorch_tanh")
    text = dict(SMALL, intermediate_size=256, vocab_size=64, max_position_embeddings=64,
                hidden_act="gelu_pytorch_tanh")
    model = SiglipModel(SiglipConfig(text_config=text, vision_config=vision)).eval()
    randomize(model, seed)
    d = os.path.join(out, "hf_siglip_full")
    model.save_pretrained(d, safe_serialization=True)
    SiglipImageProcessor().save_pretrained(d)
    # A tokenizer of the model's own kind: sentencepiece trained on the prompts (no download needed).
    tokenizer = siglip_tokenizer(d, [f"This is a photo of {c}." for c in CLASSES])
    x = hf_input(SiglipImageProcessor(), photos)
    subprocess.run([sys.executable, EXPORT, "--model", d, "-o", os.path.join(d, "classes.safetensors"), *CLASSES],
                   check=True)
    # SiglipModel's own zero-shot: its logits_per_image through a sigmoid, one prompt per class as
    # transformers' zero-shot pipeline words it for SigLIP.
    texts = tokenizer([f"This is a photo of {c}." for c in CLASSES], padding="max_length", return_tensors="pt")
    with torch.no_grad():
        o = model(input_ids=texts["input_ids"], pixel_values=x)
        v = o.vision_model_output
    save_refs(d, "reference.safetensors", {"input": x, "tokens": v.last_hidden_state, "embeddings": v.pooler_output,
                                           "outputs": v.pooler_output,
                                           "zero_shot": torch.sigmoid(o.logits_per_image)}, photos, "SiglipModel")


def openclip(out, photos, name, seed, quick_gelu):
    model_cfg = {"embed_dim": 32, "quick_gelu": quick_gelu,
                 "vision_cfg": {"image_size": 224, "layers": 2, "width": 64, "head_width": 32, "patch_size": 16},
                 "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2}}
    model = open_clip.CLIP(**model_cfg).eval()
    randomize(model, seed)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    save_file(model.state_dict(), os.path.join(d, "open_clip_model.safetensors"))
    with open(os.path.join(d, "open_clip_config.json"), "w") as f:
        json.dump({"model_cfg": model_cfg, "preprocess_cfg": {"mean": list(open_clip.OPENAI_DATASET_MEAN),
                                                              "std": list(open_clip.OPENAI_DATASET_STD)}}, f, indent=2)
    transform = open_clip.image_transform(224, is_train=False)
    x = torch.stack([transform(Image.open(p).convert("RGB")) for p in photos])
    tokens = {}
    hook = model.visual.ln_post.register_forward_hook(lambda m, i, o: tokens.setdefault("t", o))
    with torch.no_grad():
        outputs = model.encode_image(x)
        hook.remove()
        proj, model.visual.proj = model.visual.proj, None
        embeddings = model.visual(x)
        model.visual.proj = proj
        # The zero-shot file as scripts/export_text_embeddings.py writes it, and open_clip's own probabilities.
        subprocess.run([sys.executable, EXPORT, "--model", d, "-o", os.path.join(d, "classes.safetensors"), *CLASSES],
                       check=True)
        classifier = open_clip.build_zero_shot_classifier(
            model, open_clip.get_tokenizer("ViT-B-32"), CLASSES, open_clip.OPENAI_IMAGENET_TEMPLATES)
        features = torch.nn.functional.normalize(outputs, dim=-1)
        zero_shot = (model.logit_scale.exp() * features @ classifier).softmax(dim=-1)
    save_refs(d, "reference.safetensors", {"input": x, "tokens": tokens["t"], "embeddings": embeddings,
                                           "outputs": outputs, "zero_shot": zero_shot}, photos, "OpenCLIP")
    if quick_gelu:
        return
    # At 288 px: the model made at that size, the checkpoint loaded through open_clip's resize_pos_embed.
    cfg = json.loads(json.dumps(model_cfg))
    cfg["vision_cfg"]["image_size"] = 288
    big = open_clip.CLIP(**cfg).eval()
    state = model.state_dict()
    open_clip.model.resize_pos_embed(state, big)
    big.load_state_dict(state)
    x = torch.stack([open_clip.image_transform(288, is_train=False)(Image.open(p).convert("RGB")) for p in photos])
    tokens = {}
    hook = big.visual.ln_post.register_forward_hook(lambda m, i, o: tokens.setdefault("t", o))
    with torch.no_grad():
        outputs = big.encode_image(x)
        hook.remove()
        big.visual.proj = None
        embeddings = big.visual(x)
    save_refs(d, "reference_288.safetensors", {"input": x, "tokens": tokens["t"], "embeddings": embeddings,
                                               "outputs": outputs}, photos, "OpenCLIP")


# OpenCLIP towers on timm trunks: open_clip's model name, the trunk's shrink (timm kwargs: the architecture's own
# heads kept, so its head width shrinks), the text tower's, the image preprocessing of the released weights, the
# other size checked (0: none), the seed.
TIMM_TOWERS = {
    "oc_siglip_b16": ("ViT-B-16-SigLIP", dict(depth=2, embed_dim=96), dict(width=64, heads=2, layers=1, vocab_size=64),
                      dict(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), resize_mode="squash"), 288, 110),
    "oc_eva02_b16": ("EVA02-B-16", dict(depth=2, embed_dim=96), dict(width=64, heads=2, layers=1), {}, 256, 111),
    # SO400M at 384 px in patches of 14: 27 x 27 patches, the last 6 pixels of each side unread by timm's patch
    # embedding; its 16 heads kept (of 4 channels), its MLP ratio (3.7362: 239 wide).
    "oc_so400m": ("ViT-SO400M-14-SigLIP-384", dict(depth=2, embed_dim=64), dict(width=64, heads=2, layers=1, vocab_size=64),
                  dict(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), resize_mode="squash"), 336, 112),
    # SigLIP 2's towers on trunks with GELU's tanh form (vit_base_patch32_siglip_256; L/16 at 512, SO400M/16,
    # gopt/16 alike).
    "oc_siglip2_b32": ("ViT-B-32-SigLIP2-256", dict(depth=2, embed_dim=96), dict(width=64, heads=2, layers=1, vocab_size=64),
                       dict(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), resize_mode="squash"), 320, 113),
}
# open_clip's SigLIP 2 and EVA-02-L configs, each with the tower above of the same structure (its trunk's timm
# family row and open_clip's pool and projection): the engine runs the trunk names of all of them
# (tests/test_layouts.cpp), the towers above checked against open_clip.
CONFIG_PATTERNS = ("ViT-*-SigLIP2*", "EVA02-L-14*")


def timm_tower_outputs(model, trunk, x):
    """tokens (the trunk's forward_features), embeddings (its pooled features before any head) and outputs
    (open_clip's encode_image)."""
    with torch.no_grad():
        tokens = trunk.forward_features(x)
        embeddings = trunk.forward_head(tokens, pre_logits=True)
        outputs = model.encode_image(x) if model is not None else trunk(x)
    return {"input": x, "tokens": tokens, "embeddings": embeddings, "outputs": outputs}


def openclip_timm(out, photos, name, tokenizer_dir):
    model_name, trunk_kwargs, text_kwargs, preprocess, other_size, seed = TIMM_TOWERS[name]
    cfg = open_clip.get_model_config(model_name)
    text_cfg = dict(cfg["text_cfg"], **text_kwargs)
    # proj 'none': the embedding is the trunk's pooled features, as wide as the (shrunk) trunk.
    embed_dim = trunk_kwargs.get("embed_dim", 1152) if cfg["vision_cfg"].get("timm_proj") == "none" else 32
    create = timm.create_model
    timm.create_model = lambda arch, **kw: create(arch, **dict(kw, **trunk_kwargs))
    try:
        model = open_clip.create_model(model_name, pretrained=None, embed_dim=embed_dim, text_cfg=text_cfg,
                                       force_preprocess_cfg=preprocess).eval()
    finally:
        timm.create_model = create
    randomize(model, seed)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    save_file(model.state_dict(), os.path.join(d, "open_clip_model.safetensors"))
    model_cfg = dict(cfg, embed_dim=embed_dim, text_cfg=text_cfg)
    save_config_for_hf(model, pathlib.Path(d, "open_clip_config.json"), model_cfg)
    pre = open_clip.transform.PreprocessCfg(**model.visual.preprocess_cfg)
    x = torch.stack([open_clip.transform.image_transform_v2(pre, is_train=False)(Image.open(p).convert("RGB")) for p in photos])
    refs = timm_tower_outputs(model, model.visual.trunk, x)
    siglip = "SigLIP" in model_name
    # The zero-shot file as scripts/export_text_embeddings.py writes it (SigLIP's tokenizer from its folder),
    # and open_clip's own probabilities from the same templates: softmax for CLIP, SigLIP's sigmoid with its
    # logit bias.
    subprocess.run([sys.executable, EXPORT, "--model", d, "-o", os.path.join(d, "classes.safetensors"), *CLASSES]
                   + (["--tokenizer", tokenizer_dir] if siglip else []), check=True)
    tokenizer = (open_clip.tokenizer.HFTokenizer(tokenizer_dir, context_length=text_cfg["context_length"],
                                                 **text_cfg.get("tokenizer_kwargs", {})) if siglip
                 else open_clip.tokenizer.SimpleTokenizer(context_length=text_cfg["context_length"]))
    with torch.no_grad():
        classifier = open_clip.build_zero_shot_classifier(model, tokenizer, CLASSES,
                                                          open_clip.OPENAI_IMAGENET_TEMPLATES)
        logits = model.logit_scale.exp() * torch.nn.functional.normalize(refs["outputs"], dim=-1) @ classifier
        refs["zero_shot"] = torch.sigmoid(logits + model.logit_bias) if siglip else logits.softmax(dim=-1)
    save_refs(d, "reference.safetensors", refs, photos, model_name)
    if not other_size:
        return
    # At another size: the trunk as timm makes it there, the checkpoint through timm's own filter (its position
    # table resampled); open_clip's image transform at that size.
    arch = cfg["vision_cfg"]["timm_model_name"]
    trunk = model.visual.trunk
    big = create(arch, img_size=other_size, num_classes=trunk.num_classes, global_pool=trunk.global_pool,
                 **trunk_kwargs).eval()
    state = {k[len("visual.trunk."):]: v for k, v in model.state_dict().items() if k.startswith("visual.trunk.")}
    big.load_state_dict(sys.modules[type(big).__module__].checkpoint_filter_fn(state, big))
    pre = open_clip.transform.PreprocessCfg(**dict(model.visual.preprocess_cfg, size=(other_size, other_size)))
    x = torch.stack([open_clip.transform.image_transform_v2(pre, is_train=False)(Image.open(p).convert("RGB")) for p in photos])
    save_refs(d, f"reference_{other_size}.safetensors", timm_tower_outputs(None, big, x), photos, model_name)


def main():
    out, photos = sys.argv[1], sys.argv[2:]
    dinov2(out, photos, "hf_dinov2", 100, registers=False)
    dinov2(out, photos, "hf_dinov2_reg", 101, registers=True)
    hf_clip(out, photos, 102)
    hf_clip_full(out, photos, 107)
    hf_siglip(out, photos, 103)
    hf_siglip_384(out, photos, 108)
    hf_siglip_full(out, photos, 106)
    openclip(out, photos, "openclip", 104, quick_gelu=False)
    openclip(out, photos, "openclip_quickgelu", 105, quick_gelu=True)
    tokenizer_dir = os.path.join(out, "siglip_tokenizer")
    siglip_tokenizer(tokenizer_dir, [t(c) if callable(t) else t.format(c) for c in CLASSES
                                     for t in open_clip.OPENAI_IMAGENET_TEMPLATES])
    for name in TIMM_TOWERS:
        openclip_timm(out, photos, name, tokenizer_dir)
    configs = {m: open_clip.get_model_config(m)["vision_cfg"] for p in CONFIG_PATTERNS
               for m in fnmatch.filter(open_clip.list_models(), p)}
    with open(os.path.join(out, "open_clip_configs.json"), "w") as f:
        json.dump(configs, f, indent=1)


if __name__ == "__main__":
    main()
