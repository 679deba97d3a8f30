// The text tower's config (text_config.h), read as each layout's own code reads it: open_clip 2.32's CLIPTextCfg and
// _build_text_tower (model.py), transformers 4.48's CLIPTextConfig and SiglipTextConfig with their defaults.
#include "text_config.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "checkpoint.h"
#include "engine/io/json_file.h"
#include "config_json.h"
#include "vit/model_files.h"

namespace vit {
namespace {

using json = nlohmann::json;


// The shape the tensors give: V, context, D, L, M and the projection's width.
void read_shapes(const Checkpoint& ck, TextConfig* c) {
  const auto tok = ck.shape("token_embedding"), pos = ck.shape("position_embedding");
  if (tok.size() != 2 || pos.size() != 2 || tok[1] != pos[1])
    throw Error(ck.path(), "the text tower's token and position embeddings have shapes " + shape_string(tok) + " and " +
                               shape_string(pos) + ", not [V, D] and [context, D]");
  c->vocab = tok[0];
  c->context = pos[0];
  c->width = tok[1];
  c->depth = 0;
  while (ck.has("blocks." + std::to_string(c->depth) + ".norm1.weight")) ++c->depth;
  if (c->depth == 0) throw Error(ck.path(), "the text tower has no blocks");
  c->mlp = ck.shape("blocks.0.mlp.fc1.weight")[0];
  if (ck.has("proj.weight")) {
    c->projection = TextProjection::Linear;
    c->embed = ck.shape("proj.weight")[0];
    c->proj_bias = ck.has("proj.bias");
  } else if (ck.has("proj_matrix")) {
    c->projection = TextProjection::Matrix;
    c->embed = ck.shape("proj_matrix")[0];
  } else {
    c->projection = TextProjection::None;
    c->embed = c->width;
  }
}

// A config's value that the tensors already say, checked against them.
void expect_int(const json& j, const char* key, int64_t have, const std::string& where, const std::string& what) {
  if (!has(j, key)) return;
  const int64_t v = get_as<int64_t>(j, key, where);
  if (v != have)
    throw Error(where, std::string(key) + " is " + std::to_string(v) + ", but the checkpoint's " + what + " is " +
                           std::to_string(have));
}

// open_clip's CLIPTextCfg keys, as TextTransformer (or _build_text_tower) uses each.
void apply_open_clip_text(const json& model_cfg, const std::string& where, TextConfig* c) {
  const json text = has(model_cfg, "text_cfg") ? model_cfg["text_cfg"] : json::object();
  if (!text.is_object()) throw Error(where, "model_cfg.text_cfg is not an object");
  static const std::set<std::string> known = {
      "context_length", "vocab_size", "width", "heads", "layers", "mlp_ratio", "hf_tokenizer_name", "tokenizer_kwargs",
      "no_causal_mask", "pool_type", "proj_bias", "proj_type", "norm_kwargs", "act_kwargs", "ls_init_value", "embed_cls",
      "pad_id", "final_ln_after_pool", "output_tokens", "hf_model_name", "hf_model_pretrained", "hf_proj_type",
      "hf_pooler_type"};
  for (const auto& [key, value] : text.items())
    if (!known.count(key)) throw Error(where, "text_cfg." + key + " is not a text tower setting this engine knows");
  if (has(text, "hf_model_name"))
    throw Error(where, "a text tower from Hugging Face (text_cfg.hf_model_name " + text["hf_model_name"].dump() +
                           "): not supported");
  if (has(text, "embed_cls") && get_as<bool>(text, "embed_cls", where))
    throw Error(where, "text_cfg.embed_cls (CoCa's class token after the text): not supported");
  if (has(text, "ls_init_value")) throw Error(where, "text_cfg.ls_init_value (layer scale in the text tower): not supported");
  if (has(text, "output_tokens") && get_as<bool>(text, "output_tokens", where))
    throw Error(where, "text_cfg.output_tokens: a tower that returns its tokens too (CoCa): not supported");
  expect_int(text, "context_length", c->context, where, "position table's rows");
  expect_int(text, "vocab_size", c->vocab, where, "token embedding's rows");
  expect_int(text, "width", c->width, where, "text width");
  expect_int(text, "layers", c->depth, where, "text blocks");
  if (has(text, "mlp_ratio") && int64_t(double(c->width) * get_as<double>(text, "mlp_ratio", where)) != c->mlp)
    throw Error(where, "text_cfg.mlp_ratio gives an MLP of " +
                           std::to_string(int64_t(double(c->width) * get_as<double>(text, "mlp_ratio", where))) +
                           ", but the checkpoint's is " + std::to_string(c->mlp));
  c->heads = has(text, "heads") ? get_as<int64_t>(text, "heads", where) : 8;  // CLIPTextCfg's default
  c->causal = !(has(text, "no_causal_mask") && get_as<bool>(text, "no_causal_mask", where));
  const std::string pool = has(text, "pool_type") ? get_as<std::string>(text, "pool_type", where) : "argmax";
  if (pool == "argmax") c->pool = TextPool::Argmax;
  else if (pool == "last") c->pool = TextPool::Last;
  else if (pool == "first") c->pool = TextPool::First;
  else throw Error(where, "text_cfg.pool_type '" + pool + "' is not supported (argmax, first, last)");
  // _build_text_tower: QuickGELU with quick_gelu, else nn.GELU, either given act_kwargs.
  const bool quick = has(model_cfg, "quick_gelu") && get_as<bool>(model_cfg, "quick_gelu", where);
  c->act = quick ? Activation::QuickGelu : Activation::Gelu;
  if (has(text, "act_kwargs")) {
    const json& a = text["act_kwargs"];
    if (quick || !a.is_object() || a.size() != 1 || !a.contains("approximate") || a["approximate"] != "tanh")
      throw Error(where, "text_cfg.act_kwargs " + a.dump() + " is not supported (GELU's {\"approximate\": \"tanh\"})");
    c->act = Activation::GeluTanh;
  }
  if (has(text, "norm_kwargs")) {
    const json& n = text["norm_kwargs"];
    if (!n.is_object() || n.size() != 1 || !n.contains("eps"))
      throw Error(where, "text_cfg.norm_kwargs " + n.dump() + " is not supported (only eps)");
    c->eps = get_as<float>(n, "eps", where);
  }
  const bool proj_bias = has(text, "proj_bias") && get_as<bool>(text, "proj_bias", where);
  const bool proj_none = has(text, "proj_type") && get_as<std::string>(text, "proj_type", where) == "none";
  if (proj_none != (c->projection == TextProjection::None) || (!proj_none && proj_bias != (c->projection == TextProjection::Linear)))
    throw Error(where, "text_cfg's projection (proj_type, proj_bias) is not the checkpoint's text_projection");
  if (has(text, "hf_tokenizer_name")) {
    const json kwargs = has(text, "tokenizer_kwargs") ? text["tokenizer_kwargs"] : json::object();
    if (kwargs != json{{"clean", "canonicalize"}})
      throw Error(where, "text_cfg.tokenizer_kwargs " + kwargs.dump() +
                             " is not supported with a Hugging Face tokenizer (SigLIP's {\"clean\": \"canonicalize\"})");
    c->tokenizer.kind = TokenizerKind::OpenClipSentencePiece;
  } else {
    if (has(text, "tokenizer_kwargs"))
      throw Error(where, "text_cfg.tokenizer_kwargs with open_clip's CLIP tokenizer: not supported");
    c->tokenizer.kind = TokenizerKind::OpenClipBpe;
  }
}

// CLIPTextConfig and SiglipTextConfig (transformers 4.48, their defaults where config.json leaves a key out).
void apply_hf_text(const json& config, Layout l, const std::string& where, TextConfig* c) {
  const bool clip = l == Layout::HfClip;
  const json text = has(config, "text_config") ? config["text_config"] : json::object();
  if (!text.is_object()) throw Error(where, "text_config is not an object");
  expect_int(text, "vocab_size", c->vocab, where, "token embedding's rows");
  expect_int(text, "max_position_embeddings", c->context, where, "position table's rows");
  expect_int(text, "hidden_size", c->width, where, "text width");
  expect_int(text, "num_hidden_layers", c->depth, where, "text blocks");
  expect_int(text, "intermediate_size", c->mlp, where, "text MLP width");
  if (clip) expect_int(config, "projection_dim", c->embed, where, "text projection's width");
  c->heads = has(text, "num_attention_heads") ? get_as<int64_t>(text, "num_attention_heads", where) : clip ? 8 : 12;
  c->eps = has(text, "layer_norm_eps") ? get_as<float>(text, "layer_norm_eps", where) : clip ? 1e-5f : 1e-6f;
  const std::string act = has(text, "hidden_act") ? get_as<std::string>(text, "hidden_act", where)
                                                  : clip ? "quick_gelu" : "gelu_pytorch_tanh";
  if (act == "quick_gelu") c->act = Activation::QuickGelu;
  else if (act == "gelu") c->act = Activation::Gelu;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_new") c->act = Activation::GeluTanh;
  else throw Error(where, "text_config.hidden_act '" + act + "' is not supported (gelu, quick_gelu, gelu_pytorch_tanh, gelu_new)");
  c->causal = clip;
  if (clip) {
    // CLIPTextTransformer: the argmax of the ids when eos_token_id is 2 (the older configs), else the first eos.
    const int64_t eos = has(text, "eos_token_id") ? get_as<int64_t>(text, "eos_token_id", where) : 49407;
    c->pool = eos == 2 ? TextPool::Argmax : TextPool::FirstEos;
    c->eos_id = int32_t(eos);
    c->tokenizer.kind = TokenizerKind::HfClipBpe;
  } else {
    c->pool = TextPool::Last;  // SiglipTextTransformer: last_hidden_state[:, -1, :], then head
    c->tokenizer.kind = TokenizerKind::HfSiglipSentencePiece;
  }
}

}  // namespace

const char* text_pool_name(TextPool p) {
  switch (p) {
    case TextPool::Argmax: return "the largest token id's row";
    case TextPool::FirstEos: return "the first end-of-text row";
    case TextPool::First: return "the first row";
    case TextPool::Last: return "the last row";
  }
  return "?";
}

int64_t pooled_row(const TextConfig& c, const Tokens& t) {
  switch (c.pool) {
    case TextPool::Argmax:  // text.argmax(dim=-1): the first of the largest
      return std::max_element(t.ids.begin(), t.ids.end()) - t.ids.begin();
    case TextPool::FirstEos: {  // (input_ids == eos_token_id).int().argmax(dim=-1): the first, or 0 without one
      const auto it = std::find(t.ids.begin(), t.ids.end(), c.eos_id);
      return it == t.ids.end() ? 0 : it - t.ids.begin();
    }
    case TextPool::First: return 0;
    case TextPool::Last: return int64_t(t.ids.size()) - 1;  // x[:, -1]
  }
  return 0;
}

std::string TextConfig::summary() const {
  return family + " text: " + std::to_string(depth) + " blocks of width " + std::to_string(width) + ", " +
         std::to_string(heads) + " heads, MLP " + std::to_string(mlp) + " " + activation_name(act) + ", " +
         (causal ? "causal" : "unmasked") + " over " + std::to_string(context) + " tokens, pooled at " +
         text_pool_name(pool) + ", embedding " + std::to_string(embed) + "; " + tokenizer_kind_name(tokenizer.kind);
}

TextConfig resolve_text_config(const Checkpoint& ck, const ModelFiles& files, const std::string& tokenizer_folder) {
  TextConfig c;
  c.layout = ck.layout();
  read_shapes(ck, &c);
  const std::string where = files.config.empty() ? ck.path() : files.config;
  const json config = files.config.empty() ? json::object() : read_json_file(files.config);
  if (c.layout == Layout::HfClip || c.layout == Layout::HfSiglip) {
    if (files.config.empty()) throw Error(files.folder, "has no config.json: a Hugging Face model's text tower needs it");
    apply_hf_text(config, c.layout, where, &c);
    c.family = c.layout == Layout::HfClip ? "CLIP" : "SigLIP";
  } else {
    if (!has(config, "model_cfg") || !config["model_cfg"].is_object())
      throw Error(files.folder, "has no open_clip_config.json with a model_cfg: the text tower's heads, activation, "
                                "mask and pooling are read from it");
    apply_open_clip_text(config["model_cfg"], where, &c);
    const json& vision = config["model_cfg"].value("vision_cfg", json::object());
    const std::string trunk = vision.is_object() ? vision.value("timm_model_name", "") : "";
    c.family = c.tokenizer.kind == TokenizerKind::OpenClipSentencePiece
                   ? (c.act == Activation::GeluTanh ? "SigLIP 2" : "SigLIP")
                   : trunk.rfind("eva", 0) == 0 ? "EVA-02 CLIP" : "CLIP";
  }
  if (c.heads <= 0 || c.width % c.heads)
    throw Error(where, "the text tower's width " + std::to_string(c.width) + " does not split into " +
                           std::to_string(c.heads) + " heads");
  const std::string folder = tokenizer_folder.empty() ? files.folder : tokenizer_folder;
  const TokenizerKind kind = c.tokenizer.kind;
  c.tokenizer = find_tokenizer_files(kind, folder, c.context);
  return c;
}

}  // namespace vit
