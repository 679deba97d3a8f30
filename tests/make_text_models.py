"""The reference side of tests/test_tokenizers.cpp and tests/test_text_tower.cpp: tokenizer folders of every kind
and their own tokens for a few thousand strings; shrunk random-weight CLIP and SigLIP models with text towers, made
by their own code, and those towers' text embeddings. Run by the project's .venv Python (open_clip, transformers,
sentencepiece from tests/requirements.txt over Debian's torch); nothing it writes is committed.

  tests/make_text_models.py OUT_DIR [PHOTO...]

Tokenizers (SentencePiece models are trained here, on text drawn as the test strings are, since the real SigLIP and
Gemma ones cannot be downloaded here):
OUT_DIR/tok_openclip_bpe     open_clip's bpe_simple_vocab_16e6.txt.gz, copied from its package
OUT_DIR/tok_openclip_merges  the same merges as a merges.txt, as OpenCLIP's hub folders hold them
OUT_DIR/tok_hf_clip          a CLIPTokenizer's vocab.json and merges.txt (save_pretrained)
OUT_DIR/tok_hf_clip_json     a CLIPTokenizerFast's tokenizer.json alone
OUT_DIR/tok_siglip_t5        open_clip's SigLipTokenizer over a unigram model with T5's special tokens (T5TokenizerFast,
                             save_pretrained), as the hub's timm/ViT-B-16-SigLIP holds one
OUT_DIR/tok_siglip_gemma     the same over a BPE model with byte fallback and Gemma's special tokens
                             (GemmaTokenizerFast), as timm/ViT-*-SigLIP2* hold one
OUT_DIR/tok_hf_siglip        transformers' SiglipTokenizer over the unigram model (save_pretrained)
OUT_DIR/tok_json_only        tok_siglip_t5 without its spiece.model: a tokenizer that cannot be run here
OUT_DIR/tokens.json          {"strings": [...], "excluded": n, "kinds": {name: {"folder", "context", "ids": [[...]]}}}:
                             each reference tokenizer's ids for every string, padded to its context; `excluded`
                             counts the drawn strings left out as mojibake (ftfy's fix_encoding would change them)
Text towers (each folder also holds its tokenizer's files):
OUT_DIR/oc_clip, oc_clip_quickgelu  open_clip.CLIP (GELU, QuickGELU): the text tower at the top level
OUT_DIR/oc_eva02             EVA02-B-16 (CustomTextCLIP: the text tower under text.)
OUT_DIR/oc_siglip            ViT-B-16-SigLIP (no causal mask, the last token, a projection with a bias)
OUT_DIR/oc_siglip2           ViT-B-32-SigLIP2-256 (the Gemma kind, GELU's tanh form)
OUT_DIR/hf_clip, hf_clip_eos2  Hugging Face CLIPModel (eos_token_id 49407; 2, the older configs' argmax pooling)
OUT_DIR/hf_siglip            Hugging Face SiglipModel
OUT_DIR/oc_clip_b32_shape, oc_siglip_b16_shape  text towers of ViT-B-32's and ViT-B-16-SigLIP's shape (12 blocks of
                             width 512 and 768; random weights in F16), for int8's agreement with f32
OUT_DIR/<model>/text_reference.safetensors  ids [N, context] (as F32) from the reference tokenizer, embeddings [N, E]
                             from encode_text / get_text_features; metadata "strings" (JSON)
OUT_DIR/oc_clip/zero_shot.json  open_clip's zero-shot classification of the PHOTOs (when given): the class names
                             (also in classes.txt), and per template set (imagenet: OPENAI_IMAGENET_TEMPLATES, simple:
                             SIMPLE_IMAGENET_TEMPLATES) build_zero_shot_classifier's class embeddings [C, E] and the
                             photos' probabilities softmax(logit_scale.exp() * normalize(encode_image(x)) @ classifier),
                             each photo through open_clip's own eval transform
"""
import gzip
import io
import json
import os
import pathlib
import random
import shutil
import sys

import ftfy
import open_clip
import sentencepiece
import timm
import torch
from open_clip.push_to_hf_hub import save_config_for_hf
from safetensors.torch import save_file
from transformers import (AutoTokenizer, CLIPConfig, CLIPModel, CLIPTokenizer, CLIPTokenizerFast, SiglipConfig,
                          SiglipModel, SiglipTokenizer)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_layout_models import clip_tokenizer, randomize  # noqa: E402

VOCAB = 1000  # the trained SentencePiece models' pieces

# Pools the test strings are drawn from, one per kind of text the tokenizers must agree on.
POOLS = {
    "ascii": "a photo of the dog cat on beach red car house tree running quickly hello world imagenet tench goldfish "
             "airliner golden retriever siamese in with and 42 2024 3.14 x86_64 e-mail C++ @home #tag 100% $5".split(),
    "accents": "café naïve résumé Zürich São Paulo crème brûlée Ångström façade jalapeño über Øresund Łódź Dvořák "
               "señor garçon Ελληνικά Μόσχα привет Москва ĳssel ǅemal e\u0301cole A\u030angstrom".split(),
    "cjk": ["日本語", "中文字符", "한국어", "東京タワー", "猫と犬", "北京", "カタカナ", "ひらがな", "漢字", "사진", "写真の猫",
            "一只狗在海滩上", "바다의 개", "ｶﾀｶﾅ"],
    "emoji": ["😀", "🐶", "🏖️", "👍🏽", "🇯🇵", "❤️", "👨‍👩‍👧", "🔥", "✨", "🙂", "🐈‍⬛", "🏳️‍🌈", "☕", "⚽"],
    "html": ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;", "&eacute;", "&hellip;", "&nbsp;", "&copy;", "&#x2019;",
             "&amp;amp;", "&ldquo;", "&rdquo;", "&mdash;", "&NTILDE;", "&EACUTE;", "&notin", "&amp", "&#128512;",
             "&#x80;", "&#0;", "&#65", "&#xD800;", "&bogus;", "&lt;b&gt;", "<b>", "</i>", "&ltx", "&#9999999999;"],
    "case": ["HELLO", "Hello", "hElLo", "ΣΑΣ", "ὈΔΥΣΣΕΎΣ", "İstanbul", "STRASSE", "straße", "ǅ", "ﬀ", "Ǉubljana",
             "MacDonald", "iPhone", "ÉCOLE"],
    "punct": ["!!!", "???", "...", "--", "!?!?", "***", ",,,", ";;", "''", '""', "((", "))", "…", "—", "«»", "¿¡",
              "''s", "'S", "'LL", "-_-", "~~~", "###", "@@", "^^", "…!!", "。", "、", "！？"],
    "fullwidth": ["ＬＯＵＤ", "ｎｏｉｓｅ", "１２３", "！", "？", "（ｘ）", "ﾃｽﾄ", "\u3000", "ＡＢＣ１２３", "＄５", "＃ｔａｇ", "ﾊﾟﾝ"],
    "misc": ["ﬁne", "ﬂower", "“quoted”", "‘single’", "it’s", "don't", "I'll", "we've", "they're", "x²", "½", "№5",
             "Ⅻ", "\t", "\n", "  ", "\u00a0", "\u2028", "\r\n", "\r", "\x0b", "\x1c", "\u200b", "\ufeff", "\x1b[31mred\x1b[0m",
             "\x07", "\x85", "\x9c", "a\u0308", "\u212b", "K", "ſ", "ﬅ", "<start_of_text>", "<|endoftext|>",
             "</s>", "<unk>", "<pad>", "▁", "_under_score_", "\x00"],
}


def draw(r, category, words):
    pool = POOLS[category]
    out = []
    for _ in range(words):
        c = category if r.random() < 0.7 else r.choice(list(POOLS))
        w = r.choice(POOLS[c] if c != category else pool)
        if r.random() < 0.15:
            w = w.upper() if r.random() < 0.5 else w.capitalize()
        out.append(w)
    sep = r.choice([" ", " ", " ", "", "  ", "\t", " \n "])
    return sep.join(out)


def test_strings(per_category=270, seed=1):
    """Strings of every category, some over-length (hundreds of words, a few of 100,000 characters); the ones
    ftfy would repair as mojibake left out (their count returned)."""
    r = random.Random(seed)
    strings, excluded = [], 0
    for category in POOLS:
        for i in range(per_category):
            words = r.randint(1, 14) if i % 10 else r.randint(60, 400)
            strings.append(draw(r, category, words))
    for i in range(3):  # 100,000 characters
        s = draw(r, "ascii", 30000)
        strings.append((s * (100000 // max(1, len(s)) + 1))[:100000])
    strings += ["", " ", "a", "\n\n", "&", "'", "!!!!!!!!", "A photo of a dog.", "ＡＢＣ"]
    kept = []
    for s in strings:
        if ftfy.fix_text(s) != ftfy.fix_text(s, fix_encoding=False):
            excluded += 1
        else:
            kept.append(s)
    return kept, excluded


def train_sentencepiece(path, corpus, **kw):
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=model, vocab_size=VOCAB,
                                             hard_vocab_limit=False, minloglevel=2, **kw)
    with open(path, "wb") as f:
        f.write(model.getvalue())


def tokenizers(out):
    """The tokenizer folders, and the SentencePiece models they are made from."""
    corpus, _ = test_strings(per_category=300, seed=7)
    corpus = [s for s in corpus if len(s) < 2000]
    spm = os.path.join(out, "spm")
    os.makedirs(spm, exist_ok=True)
    t5, gemma = os.path.join(spm, "t5.model"), os.path.join(spm, "gemma_tokenizer.model")
    # T5's pieces and ids: <pad> 0, </s> 1, <unk> 2; a unigram model with the default NFKC normalization.
    train_sentencepiece(t5, corpus, model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1, pad_piece="<pad>",
                        eos_piece="</s>", unk_piece="<unk>")
    # Gemma's: <pad> 0, <eos> 1, <bos> 2, <unk> 3; BPE with byte fallback, no normalization, no dummy prefix, spaces
    # kept as they are, digits split.
    train_sentencepiece(gemma, corpus, model_type="bpe", byte_fallback=True, normalization_rule_name="identity",
                        add_dummy_prefix=False, remove_extra_whitespaces=False, split_digits=True,
                        allow_whitespace_only_pieces=True, pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>",
                        eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>")
    d = lambda name: os.path.join(out, name)  # noqa: E731
    os.makedirs(d("tok_openclip_bpe"), exist_ok=True)
    shutil.copy(open_clip.tokenizer.default_bpe(), d("tok_openclip_bpe"))
    os.makedirs(d("tok_hf_clip"), exist_ok=True)
    clip_tokenizer(d("tok_hf_clip"))
    os.makedirs(d("tok_openclip_merges"), exist_ok=True)
    shutil.copy(d("tok_hf_clip/merges.txt"), d("tok_openclip_merges"))
    CLIPTokenizerFast.from_pretrained(d("tok_hf_clip")).save_pretrained(d("tok_hf_clip_json"))
    for name in ("vocab.json", "merges.txt"):
        os.remove(d("tok_hf_clip_json/" + name))
    open_clip.tokenizer.SigLipTokenizer(t5).save_pretrained(d("tok_siglip_t5"))
    open_clip.tokenizer.SigLipTokenizer(gemma).save_pretrained(d("tok_siglip_gemma"))
    SiglipTokenizer(vocab_file=t5).save_pretrained(d("tok_hf_siglip"))
    shutil.copytree(d("tok_siglip_t5"), d("tok_json_only"))
    os.remove(d("tok_json_only/spiece.model"))


def reference_tokenizers(out):
    """Each kind's reference tokenizer, as a function of a list of strings giving [N, context] ids."""
    d = lambda name: os.path.join(out, name)  # noqa: E731
    hf_clip = AutoTokenizer.from_pretrained(d("tok_hf_clip"))
    hf_clip_json = AutoTokenizer.from_pretrained(d("tok_hf_clip_json"))
    hf_siglip = AutoTokenizer.from_pretrained(d("tok_hf_siglip"))
    assert hf_clip.is_fast and hf_clip_json.is_fast and type(hf_siglip) is SiglipTokenizer
    hf = lambda t, n: lambda s: t(s, padding="max_length", max_length=n, truncation=True)["input_ids"]  # noqa: E731
    oc_hf = lambda folder: open_clip.tokenizer.HFTokenizer(folder, context_length=64, clean="canonicalize")  # noqa: E731
    return {
        "openclip_bpe": ("tok_openclip_bpe", 77, open_clip.tokenizer.SimpleTokenizer()),
        "openclip_merges": ("tok_openclip_merges", 77, open_clip.tokenizer.SimpleTokenizer()),  # the same merges
        "hf_clip": ("tok_hf_clip", 77, hf(hf_clip, 77)),
        "hf_clip_json": ("tok_hf_clip_json", 77, hf(hf_clip_json, 77)),
        "siglip_t5": ("tok_siglip_t5", 64, oc_hf(d("tok_siglip_t5"))),
        "siglip_gemma": ("tok_siglip_gemma", 64, oc_hf(d("tok_siglip_gemma"))),
        "hf_siglip": ("tok_hf_siglip", 64, hf(hf_siglip, 64)),
    }


def token_references(out):
    strings, excluded = test_strings()
    kinds = {}
    for name, (folder, context, tokenize) in reference_tokenizers(out).items():
        ids = tokenize(strings)
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else ids
        assert all(len(row) == context for row in ids), name
        kinds[name] = {"folder": folder, "context": context, "ids": ids}
        print(name, len(ids), "strings")
    with open(os.path.join(out, "tokens.json"), "w", encoding="utf-8") as f:
        json.dump({"strings": strings, "excluded": excluded, "kinds": kinds}, f, ensure_ascii=False)


# The strings each tower is run on: lengths from the empty text to one cut at the context.
TOWER_STRINGS = ["a photo of a dog", "", "A PHOTO OF A CAT on the beach!!!", "猫と犬 🐶", "café crème", "x",
                 "tench " * 120, "&amp; “quoted” ﬁne ＬＯＵＤ", "goldfish", "a red car next to a house, in the rain"]


def save_text_reference(d, ids, embeddings):
    ids = torch.as_tensor(ids)
    save_file({"ids": ids.float().contiguous(), "embeddings": embeddings.float().contiguous()},
              os.path.join(d, "text_reference.safetensors"), metadata={"strings": json.dumps(TOWER_STRINGS)})
    print(os.path.basename(d), "text", tuple(ids.shape), tuple(embeddings.shape))


def copy_tokenizer(out, folder, d):
    for f in os.listdir(os.path.join(out, folder)):
        shutil.copy(os.path.join(out, folder, f), d)


def save_state(model, path, half):
    """The model's weights, in F16 when `half` (the model's own weights rounded to it, so that its outputs are
    those of the file)."""
    if half:
        model.half().float()
    state = {k: (v.half() if half else v).contiguous() for k, v in model.state_dict().items()}
    save_file(state, path)


def oc_clip(out, name, seed, quick_gelu, text=None, embed_dim=32):
    """open_clip.CLIP with a text tower of `text` (width, heads, layers; by default shrunk to 64, 2, 2), stored in
    F16 when it is of a real model's size."""
    text = text or {"width": 64, "heads": 2, "layers": 2}
    model_cfg = {"embed_dim": embed_dim, "quick_gelu": quick_gelu,
                 "vision_cfg": {"image_size": 224, "layers": 1, "width": 64, "head_width": 32, "patch_size": 16},
                 "text_cfg": dict({"context_length": 77, "vocab_size": 49408}, **text)}
    model = open_clip.CLIP(**model_cfg).eval()
    randomize(model, seed)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    save_state(model, os.path.join(d, "open_clip_model.safetensors"), half=text["width"] > 64)
    with open(os.path.join(d, "open_clip_config.json"), "w") as f:
        json.dump({"model_cfg": model_cfg}, f, indent=2)
    copy_tokenizer(out, "tok_openclip_bpe", d)
    ids = open_clip.tokenizer.SimpleTokenizer()(TOWER_STRINGS)
    with torch.no_grad():
        save_text_reference(d, ids, model.encode_text(ids))
    return model


def oc_timm(out, name, model_name, text_kwargs, tokenizer_folder, seed, shrink_text=True):
    """An OpenCLIP CustomTextCLIP on a shrunk timm trunk, its text tower shrunk (or of its real shape, in F16)."""
    cfg = open_clip.get_model_config(model_name)
    text_cfg = dict(cfg["text_cfg"], **(dict(width=64, heads=2, layers=2) if shrink_text else {}), **text_kwargs)
    embed_dim = 96 if cfg["vision_cfg"].get("timm_proj") == "none" else 32
    create = timm.create_model
    timm.create_model = lambda arch, **kw: create(arch, **dict(kw, depth=1, embed_dim=96))
    try:
        model = open_clip.create_model(model_name, pretrained=None, embed_dim=embed_dim, text_cfg=text_cfg).eval()
    finally:
        timm.create_model = create
    randomize(model, seed)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    save_state(model, os.path.join(d, "open_clip_model.safetensors"), half=not shrink_text)
    save_config_for_hf(model, pathlib.Path(d, "open_clip_config.json"), dict(cfg, embed_dim=embed_dim, text_cfg=text_cfg))
    copy_tokenizer(out, tokenizer_folder, d)
    if text_cfg.get("hf_tokenizer_name"):
        tokenizer = open_clip.tokenizer.HFTokenizer(d, context_length=text_cfg["context_length"],
                                                    **text_cfg.get("tokenizer_kwargs", {}))
    else:
        tokenizer = open_clip.tokenizer.SimpleTokenizer(context_length=text_cfg["context_length"])
    ids = tokenizer(TOWER_STRINGS)
    with torch.no_grad():
        save_text_reference(d, ids, model.encode_text(ids))


# Class names for the zero-shot references: accents, several words, a comma (read from a file by the test).
ZERO_SHOT_CLASSES = ["tench", "goldfish", "great white shark", "café crème", "dog, on a beach", "Siamese cat"]


def zero_shot(d, model, photos):
    """open_clip's zero-shot classifier (build_zero_shot_classifier) on the photos, as its zero-shot evaluation runs
    it, scored with the model's own logit_scale.exp() (CLIP.forward's) rather than the evaluation's fixed 100."""
    from open_clip.zero_shot_classifier import build_zero_shot_classifier
    from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES, SIMPLE_IMAGENET_TEMPLATES
    from PIL import Image
    photos = [p for p in photos if os.path.exists(p)]  # the shared data's, when it is there
    if not photos:
        return
    with open(os.path.join(d, "classes.txt"), "w", encoding="utf-8") as f:
        f.write("".join(c + "\n" for c in ZERO_SHOT_CLASSES))
    transform = open_clip.image_transform(model.visual.image_size, is_train=False)
    images = torch.stack([transform(Image.open(p).convert("RGB")) for p in photos])
    ref = {"classes": ZERO_SHOT_CLASSES, "photos": photos, "logit_scale": float(model.logit_scale.exp())}
    with torch.no_grad():
        features = torch.nn.functional.normalize(model.encode_image(images), dim=-1)
        for name, templates in (("imagenet", OPENAI_IMAGENET_TEMPLATES), ("simple", SIMPLE_IMAGENET_TEMPLATES)):
            classifier = build_zero_shot_classifier(model, tokenizer=open_clip.tokenizer.SimpleTokenizer(),
                                                    classnames=ZERO_SHOT_CLASSES, templates=templates,
                                                    num_classes_per_batch=4, device="cpu")
            probs = (model.logit_scale.exp() * features @ classifier).softmax(dim=-1)
            ref[name] = {"classifier": classifier.T.tolist(), "probs": probs.tolist()}
    with open(os.path.join(d, "zero_shot.json"), "w") as f:
        json.dump(ref, f)
    print(os.path.basename(d), "zero-shot", len(photos), "photos")


def hf_clip(out, name, seed, eos_token_id, hidden_act):
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256)
    model = CLIPModel(CLIPConfig(text_config=dict(small, eos_token_id=eos_token_id, hidden_act=hidden_act),
                                 vision_config=dict(small, image_size=224, patch_size=16, num_hidden_layers=1),
                                 projection_dim=32)).eval()
    randomize(model, seed)
    d = os.path.join(out, name)
    model.save_pretrained(d, safe_serialization=True)
    copy_tokenizer(out, "tok_hf_clip", d)
    t = AutoTokenizer.from_pretrained(d)(TOWER_STRINGS, padding="max_length", max_length=77, truncation=True,
                                         return_tensors="pt")
    with torch.no_grad():
        e = model.get_text_features(input_ids=t["input_ids"], attention_mask=t["attention_mask"])
    save_text_reference(d, t["input_ids"], e)


def hf_siglip(out, seed):
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256)
    model = SiglipModel(SiglipConfig(text_config=dict(small, vocab_size=VOCAB, max_position_embeddings=64),
                                     vision_config=dict(small, image_size=224, patch_size=16,
                                                        num_hidden_layers=1))).eval()
    randomize(model, seed)
    d = os.path.join(out, "hf_siglip")
    model.save_pretrained(d, safe_serialization=True)
    copy_tokenizer(out, "tok_hf_siglip", d)
    ids = AutoTokenizer.from_pretrained(d)(TOWER_STRINGS, padding="max_length", max_length=64, truncation=True,
                                           return_tensors="pt")["input_ids"]
    with torch.no_grad():
        save_text_reference(d, ids, model.get_text_features(input_ids=ids))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tokenizers(out)
    token_references(out)
    zero_shot(os.path.join(out, "oc_clip"), oc_clip(out, "oc_clip", 200, quick_gelu=False), sys.argv[2:])
    oc_clip(out, "oc_clip_quickgelu", 201, quick_gelu=True)
    oc_timm(out, "oc_eva02", "EVA02-B-16", {}, "tok_openclip_bpe", 202)
    oc_timm(out, "oc_siglip", "ViT-B-16-SigLIP", {"vocab_size": VOCAB}, "tok_siglip_t5", 203)
    oc_timm(out, "oc_siglip2", "ViT-B-32-SigLIP2-256", {"vocab_size": VOCAB}, "tok_siglip_gemma", 204)
    hf_clip(out, "hf_clip", 205, 49407, "gelu")
    hf_clip(out, "hf_clip_eos2", 206, 2, "quick_gelu")
    hf_siglip(out, 207)
    # Text towers of real models' shapes (random weights, stored in F16), where int8's agreement with f32 is judged:
    # ViT-B-32's (12 blocks of width 512, QuickGELU as OpenAI's) and ViT-B-16-SigLIP's (12 of 768).
    oc_clip(out, "oc_clip_b32_shape", 208, quick_gelu=True, text={"width": 512, "heads": 8, "layers": 12},
            embed_dim=512)
    oc_timm(out, "oc_siglip_b16_shape", "ViT-B-16-SigLIP", {"vocab_size": VOCAB}, "tok_siglip_t5", 209,
            shrink_text=False)


if __name__ == "__main__":
    main()
