"""scripts/export_text_embeddings.py as its users run it (CTest test export_text_embeddings, label torch; the
.venv's Python): a Hugging Face CLIPModel folder gives CLIPModel's own zero-shot probabilities; image towers
without a text tower (timm's CLIP, CLIPVisionModel) and every bad input (a missing --classes file, -o in a
missing folder, an existing file that is not a text-embeddings file) get one `error:` line and exit 2 before
any model is loaded; -o and every other option have help. Tiny random models made here (the engine's side of
the same files: tests/test_layouts.cpp)."""
import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "scripts", "export_text_embeddings.py")
CLASSES = ["tench", "Siamese cat", "airliner"]

try:
    import open_clip
    import torch
    import transformers
    from safetensors import safe_open
except ImportError as e:  # scripts/setup.sh installs tests/requirements.txt into .venv
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(f"{sys.executable} lacks {e.name} (pip install -r tests/requirements.txt into .venv); skipping",
                allow_module_level=True)


def export(*args, env=None):
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=env)


def refused(run, message):
    assert run.returncode == 2, f"exit {run.returncode}\n{run.stdout}\n{run.stderr}"
    assert "Traceback" not in run.stderr, run.stderr
    assert run.stderr.count("error:") == 1 and message in run.stderr, run.stderr


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    # An OpenCLIP folder, as open_clip's save_for_hf writes one.
    cfg = {"embed_dim": 16, "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16,
                                           "patch_size": 16},
           "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}
    openclip = d / "openclip"
    openclip.mkdir()
    from safetensors.torch import save_file
    save_file(open_clip.CLIP(**cfg).state_dict(), openclip / "open_clip_model.safetensors")
    (openclip / "open_clip_config.json").write_text(json.dumps({"model_cfg": cfg}))
    # The same with weights that are not safetensors: loading it fails.
    broken = d / "broken_openclip"
    broken.mkdir()
    (broken / "open_clip_model.safetensors").write_bytes(b"not safetensors")
    (broken / "open_clip_config.json").write_text(json.dumps({"model_cfg": cfg}))
    # A whole Hugging Face CLIPModel with a tokenizer of CLIP's own vocabulary.
    sys.path.insert(0, HERE)
    from make_layout_models import clip_tokenizer
    small = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    hf_clip = d / "hf_clip"
    model = transformers.CLIPModel(transformers.CLIPConfig(
        text_config=small, vision_config=dict(small, image_size=32, patch_size=16), projection_dim=16)).eval()
    model.save_pretrained(hf_clip, safe_serialization=True)
    clip_tokenizer(str(hf_clip))
    # Image towers: timm's CLIP (a timm hub folder) and Hugging Face's CLIPVisionModelWithProjection.
    timm_clip = d / "timm_clip"
    timm_clip.mkdir()
    (timm_clip / "config.json").write_text(json.dumps({"architecture": "vit_base_patch16_clip_224", "num_classes": 512,
                                                       "pretrained_cfg": {"tag": "openai"}}))
    (timm_clip / "model.safetensors").write_bytes(b"\0" * 16)
    hf_vision = d / "hf_clip_vision"
    transformers.CLIPVisionModelWithProjection(transformers.CLIPVisionConfig(
        **small, image_size=32, patch_size=16, projection_dim=16)).save_pretrained(hf_vision, safe_serialization=True)
    return {"openclip": openclip, "broken": broken, "hf_clip": hf_clip, "timm_clip": timm_clip,
            "hf_vision": hf_vision, "model": model}


def test_hf_clip_model_like_transformers(models, tmp_path):
    out = tmp_path / "classes.safetensors"
    run = export("--model", models["hf_clip"], "-o", out, *CLASSES)
    assert run.returncode == 0, run.stderr
    with safe_open(out, "pt") as f:
        text, meta = f.get_tensor("text_embeddings"), f.metadata()
    assert json.loads(meta["labels"]) == CLASSES and meta["activation"] == "softmax" and meta["templates"] == "1"
    assert "logit_bias" not in meta
    model = models["model"]
    assert float(meta["logit_scale"]) == pytest.approx(float(model.logit_scale.exp()), rel=1e-6)
    assert torch.allclose(text.norm(dim=-1), torch.ones(len(CLASSES)), atol=1e-6)
    # CLIPModel's own zero-shot, as transformers' pipeline calls it, against scores from the file.
    tokenizer = transformers.AutoTokenizer.from_pretrained(models["hf_clip"])
    texts = tokenizer([f"This is a photo of {c}." for c in CLASSES], padding=True, return_tensors="pt")
    pixels = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(**texts, pixel_values=pixels).logits_per_image.softmax(dim=-1)
        image = torch.nn.functional.normalize(model.get_image_features(pixel_values=pixels), dim=-1)
    got = (float(meta["logit_scale"]) * image @ text.T).softmax(dim=-1)
    assert (got - want).abs().max() < 1e-5, (got, want)


def test_image_towers_refused_by_name(models, tmp_path):
    out = tmp_path / "classes.safetensors"
    refused(export("--model", models["timm_clip"], "-o", out, *CLASSES),
            "is a timm model (vit_base_patch16_clip_224): an image tower with no text tower")
    refused(export("--model", models["hf_vision"], "-o", out, *CLASSES),
            "is a Hugging Face CLIPVisionModelWithProjection, which has no text tower")
    refused(export("--model", tmp_path, "-o", out, *CLASSES), "holds neither open_clip_config.json")
    assert not out.exists()


def test_bad_inputs_named_before_any_work(models, tmp_path):
    out = tmp_path / "classes.safetensors"
    refused(export("--model", models["openclip"], "--classes", tmp_path / "absent.txt", "-o", out),
            f"--classes {tmp_path / 'absent.txt'}: no such file")
    # The broken model is never loaded: the missing folder is found first.
    refused(export("--model", models["broken"], "-o", tmp_path / "absent" / "classes.safetensors", *CLASSES),
            f"the folder {tmp_path / 'absent'} does not exist")
    (tmp_path / "afile").write_text("a file")
    refused(export("--model", models["broken"], "-o", tmp_path / "afile" / "classes.safetensors", *CLASSES),
            f"{tmp_path / 'afile'} is not a folder")
    refused(export("--model", models["openclip"], "-o", "", *CLASSES), "-o: an empty file name")
    refused(export("--model", models["openclip"], "-o", out, "tench", "tench"), "given twice: tench")
    refused(export("--model", "ViT-B-32", "--pretrained", tmp_path / "absent.safetensors", "-o", out, *CLASSES),
            "--pretrained")
    # The weights are read only after every check, and what is wrong with them is one error line too.
    refused(export("--model", models["broken"], "-o", out, *CLASSES), f"cannot load {models['broken']}")
    assert not out.exists()


def test_tokenizer_option_named_where_it_does_not_apply(models, tmp_path):
    """--tokenizer DIR is for OpenCLIP folders whose config names a Hugging Face tokenizer (SigLIP's); without it,
    offline, the hub's is not there and the error says to give one. The engine's side: tests/test_layouts.cpp's
    SigLIP tower on a timm trunk, exported with --tokenizer."""
    out = tmp_path / "classes.safetensors"
    refused(export("--model", models["hf_clip"], "--tokenizer", models["hf_clip"], "-o", out, *CLASSES),
            "--tokenizer goes with an OpenCLIP model folder")
    refused(export("--model", models["openclip"], "--tokenizer", tmp_path / "absent", "-o", out, *CLASSES),
            f"--tokenizer {tmp_path / 'absent'}: no such folder")
    refused(export("--model", models["openclip"], "--tokenizer", models["hf_clip"], "-o", out, *CLASSES),
            "uses open_clip's own tokenizer")
    siglip = tmp_path / "siglip"
    siglip.mkdir()
    (siglip / "open_clip_config.json").write_text(json.dumps({"model_cfg": {
        "embed_dim": 16, "custom_text": True, "init_logit_bias": -10,
        "vision_cfg": {"image_size": 224, "timm_model_name": "vit_base_patch16_siglip_224", "timm_pool": "map",
                       "timm_proj": "none"},
        "text_cfg": {"context_length": 64, "vocab_size": 64, "hf_tokenizer_name": "timm/ViT-B-16-SigLIP",
                     "width": 16, "heads": 2, "layers": 1}}}))
    (siglip / "open_clip_model.safetensors").write_bytes(b"never read: the tokenizer comes first")
    offline = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"))
    refused(export("--model", siglip, "-o", out, *CLASSES, env=offline),
            "cannot load the tokenizer timm/ViT-B-16-SigLIP (give a local copy of it with --tokenizer DIR)")
    assert not out.exists()


def test_existing_output_replaced_only_when_ours(models, tmp_path):
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(b"\xff\xd8\xff\xe0 a JPEG's bytes")
    refused(export("--model", models["openclip"], "-o", photo, *CLASSES),
            f"-o {photo} exists and is not a text-embeddings file")
    assert photo.read_bytes() == b"\xff\xd8\xff\xe0 a JPEG's bytes"
    refused(export("--model", models["openclip"], "-o", tmp_path, *CLASSES), "is a folder")
    out = tmp_path / "classes.safetensors"
    assert export("--model", models["openclip"], "--templates", "simple", "-o", out, *CLASSES).returncode == 0
    # Its own output is replaced without --force (a new run with other names), anything else with it.
    run = export("--model", models["openclip"], "--templates", "simple", "-o", out, "goldfish")
    assert run.returncode == 0, run.stderr
    with safe_open(out, "pt") as f:
        assert json.loads(f.metadata()["labels"]) == ["goldfish"]
    run = export("--model", models["openclip"], "--templates", "simple", "-o", photo, "--force", *CLASSES)
    assert run.returncode == 0, run.stderr
    with safe_open(photo, "pt") as f:
        assert f.get_tensor("text_embeddings").shape == (3, 16)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["classes.safetensors", "photo.jpg"]  # no partial file


def test_every_option_has_help():
    run = export("--help")
    assert run.returncode == 0
    for option in ("--model MODEL", "--pretrained PRETRAINED", "--classes CLASSES", "--templates NAME",
                   "-o FILE, --out FILE", "--force"):
        # argparse writes an option's help after it, on the same line or the next; without help the next
        # thing is the next option.
        assert re.search(rf"^  {re.escape(option)}\s+[^-\s]", run.stdout, re.M), f"{option}: no help\n{run.stdout}"
    assert "the .safetensors file to write" in run.stdout
