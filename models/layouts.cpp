// The name tables of the layouts in layouts.h, each from its own model code: transformers' modeling_vit.py,
// torchvision's vision_transformer.py, transformers' modeling_dinov2.py, modeling_dinov2_with_registers.py,
// modeling_clip.py, modeling_siglip.py, open_clip's transformer.py (VisionTransformer), and open_clip's
// timm_model.py (TimmModel: the timm model as `trunk`, timm's names below `visual.trunk.`). Modules give their
// .weight and .bias; a stored name ending in '_' takes the parameter name without a dot (nn.MultiheadAttention's
// in_proj_weight).
#include "layouts.h"

#include <regex>

#include "engine/io/safetensors.h"
#include "vit/error.h"

namespace vit {
namespace {

enum Flag { kNone = 0, kTensor = 1, kTranspose = 2, kFirstThird = 4, kLastTwoThirds = 8 };

struct Rule {
  const char* timm;                  // a module (kTensor: a whole tensor name)
  std::vector<const char*> stored;   // stacked along dim 0
  int flags = kNone;
  int lead_ones = 0;
};

struct Table {
  const char* block_prefix;  // "{i}" stands for the block's index
  std::vector<Rule> top, block;
};

// transformers' ViTLayer: layernorm_before, attention (ViTSelfAttention's query, key, value + ViTSelfOutput),
// layernorm_after, intermediate, output; ViTForImageClassification's classifier.
const Table kHfViT = {
    "vit.encoder.layer.{i}.",
    {{"cls_token", {"vit.embeddings.cls_token"}, kTensor}, {"pos_embed", {"vit.embeddings.position_embeddings"}, kTensor},
     {"patch_embed.proj", {"vit.embeddings.patch_embeddings.projection"}}, {"norm", {"vit.layernorm"}},
     {"head", {"classifier"}}},
    {{"norm1", {"layernorm_before"}},
     {"attn.qkv", {"attention.attention.query", "attention.attention.key", "attention.attention.value"}},
     {"attn.proj", {"attention.output.dense"}}, {"norm2", {"layernorm_after"}},
     {"mlp.fc1", {"intermediate.dense"}}, {"mlp.fc2", {"output.dense"}}}};
// torchvision's VisionTransformer: conv_proj, class_token, encoder.pos_embedding, the EncoderBlocks (ln_1,
// self_attention: nn.MultiheadAttention with q, k, v stacked as timm's qkv, ln_2, mlp 0 and 3), encoder.ln,
// heads.head.
const Table kTorchvision = {
    "encoder.layers.encoder_layer_{i}.",
    {{"cls_token", {"class_token"}, kTensor}, {"pos_embed", {"encoder.pos_embedding"}, kTensor},
     {"patch_embed.proj", {"conv_proj"}}, {"norm", {"encoder.ln"}}, {"head", {"heads.head"}}},
    {{"norm1", {"ln_1"}}, {"attn.qkv", {"self_attention.in_proj_"}}, {"attn.proj", {"self_attention.out_proj"}},
     {"norm2", {"ln_2"}}, {"mlp.fc1", {"mlp.0"}}, {"mlp.fc2", {"mlp.3"}}}};
// transformers' Dinov2Layer: norm1, attention (Dinov2SelfAttention + Dinov2SelfOutput), layer_scale1,
// norm2, mlp (Dinov2MLP: fc1, act, fc2), layer_scale2.
const std::vector<Rule> kDinov2Block = {
    {"norm1", {"norm1"}},
    {"attn.qkv", {"attention.attention.query", "attention.attention.key", "attention.attention.value"}},
    {"attn.proj", {"attention.output.dense"}},
    {"ls1.gamma", {"layer_scale1.lambda1"}, kTensor},
    {"norm2", {"norm2"}},
    {"mlp.fc1", {"mlp.fc1"}},
    {"mlp.fc2", {"mlp.fc2"}},
    {"ls2.gamma", {"layer_scale2.lambda1"}, kTensor},
};
const Table kDinov2 = {"encoder.layer.{i}.",
                       {{"patch_embed.proj", {"embeddings.patch_embeddings.projection"}},
                        {"cls_token", {"embeddings.cls_token"}, kTensor},
                        {"pos_embed", {"embeddings.position_embeddings"}, kTensor},
                        {"norm", {"layernorm"}}},
                       kDinov2Block};
// Dinov2WithRegistersEmbeddings: the position table covers the class token and the patches, the
// registers come after it has been added: as timm's no_embed_class, the class slot folded into cls_token.
const Table kDinov2Registers = {"encoder.layer.{i}.",
                                {{"patch_embed.proj", {"embeddings.patch_embeddings.projection"}},
                                 {"cls_token", {"embeddings.cls_token"}, kTensor},
                                 {"reg_token", {"embeddings.register_tokens"}, kTensor},
                                 {"pos_embed", {"embeddings.position_embeddings"}, kTensor},
                                 {"norm", {"layernorm"}}},
                                kDinov2Block};
// CLIPEncoderLayer and SiglipEncoderLayer: layer_norm1, self_attn (q/k/v/out_proj), layer_norm2, mlp.
const std::vector<Rule> kHfBlock = {
    {"norm1", {"layer_norm1"}},
    {"attn.qkv", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}},
    {"attn.proj", {"self_attn.out_proj"}},
    {"norm2", {"layer_norm2"}},
    {"mlp.fc1", {"mlp.fc1"}},
    {"mlp.fc2", {"mlp.fc2"}},
};
// CLIPVisionTransformer: pre_layrnorm (sic) before the encoder; post_layernorm on the pooled class token
// only (timm's fc_norm: last_hidden_state stays unnormalised); visual_projection without a bias.
const Table kHfClip = {
    "vision_model.encoder.layers.{i}.",
    {{"patch_embed.proj", {"vision_model.embeddings.patch_embedding"}},
     {"cls_token", {"vision_model.embeddings.class_embedding"}, kTensor, 2},
     {"pos_embed", {"vision_model.embeddings.position_embedding.weight"}, kTensor, 1},
     {"norm_pre", {"vision_model.pre_layrnorm"}}, {"fc_norm", {"vision_model.post_layernorm"}},
     {"head", {"visual_projection"}}},
    kHfBlock};
// SiglipVisionTransformer: no class token; post_layernorm over all tokens, then the attention-pool head
// (SiglipMultiheadAttentionPoolingHead: probe, nn.MultiheadAttention with q, k, v stacked in in_proj,
// layernorm, mlp).
const Table kHfSiglip = {
    "vision_model.encoder.layers.{i}.",
    {{"patch_embed.proj", {"vision_model.embeddings.patch_embedding"}},
     {"pos_embed", {"vision_model.embeddings.position_embedding.weight"}, kTensor, 1},
     {"norm", {"vision_model.post_layernorm"}},
     {"attn_pool.latent", {"vision_model.head.probe"}, kTensor},
     {"attn_pool.q", {"vision_model.head.attention.in_proj_"}, kFirstThird},
     {"attn_pool.kv", {"vision_model.head.attention.in_proj_"}, kLastTwoThirds},
     {"attn_pool.proj", {"vision_model.head.attention.out_proj"}},
     {"attn_pool.norm", {"vision_model.head.layernorm"}},
     {"attn_pool.mlp.fc1", {"vision_model.head.mlp.fc1"}},
     {"attn_pool.mlp.fc2", {"vision_model.head.mlp.fc2"}}},
    kHfBlock};
// open_clip's VisionTransformer: conv1 (no bias), class_embedding, positional_embedding, ln_pre, the
// resblocks (ResidualAttentionBlock: ln_1, attn, ls_1, ln_2, mlp c_fc/c_proj, ls_2), ln_post over all
// tokens, and pooled @ proj: proj is [D, E], timm's head.weight transposed.
const Table kOpenClip = {"visual.transformer.resblocks.{i}.",
                         {{"patch_embed.proj", {"visual.conv1"}},
                          {"cls_token", {"visual.class_embedding"}, kTensor, 2},
                          {"pos_embed", {"visual.positional_embedding"}, kTensor, 1},
                          {"norm_pre", {"visual.ln_pre"}},
                          {"norm", {"visual.ln_post"}},
                          {"head.weight", {"visual.proj"}, kTensor | kTranspose}},
                         {{"norm1", {"ln_1"}},
                          {"attn.qkv", {"attn.in_proj_"}},
                          {"attn.proj", {"attn.out_proj"}},
                          {"ls1.gamma", {"ls_1.gamma"}, kTensor},
                          {"norm2", {"ln_2"}},
                          {"mlp.fc1", {"mlp.c_fc"}},
                          {"mlp.fc2", {"mlp.c_proj"}},
                          {"ls2.gamma", {"ls_2.gamma"}, kTensor}}};

// The text towers beside the image towers, in the engine's names for a text tower (text_tower.h: token_embedding,
// position_embedding, the blocks as timm's, norm, proj or proj_matrix). open_clip's TextTransformer (and CLIP's
// text side, kept at the top level): token_embedding, positional_embedding, the resblocks as the visual ones,
// ln_final, text_projection (a Parameter [D, E], x @ text_projection; with proj_bias a Linear).
const Table kOpenClipText = {"transformer.resblocks.{i}.",
                             {{"token_embedding", {"token_embedding.weight"}, kTensor},
                              {"position_embedding", {"positional_embedding"}, kTensor},
                              {"norm", {"ln_final"}},
                              {"proj_matrix", {"text_projection"}, kTensor | kTranspose},
                              {"proj", {"text_projection"}}},
                             kOpenClip.block};
// CLIPTextTransformer and SiglipTextTransformer: embeddings, the encoder's layers as the vision ones,
// final_layer_norm; CLIPModel's text_projection (no bias), SiglipTextTransformer's head.
const std::vector<Rule> kHfTextTop = {
    {"token_embedding", {"text_model.embeddings.token_embedding.weight"}, kTensor},
    {"position_embedding", {"text_model.embeddings.position_embedding.weight"}, kTensor},
    {"norm", {"text_model.final_layer_norm"}}};
const Table kHfClipText = {"text_model.encoder.layers.{i}.", [] {
                             auto top = kHfTextTop;
                             top.push_back({"proj", {"text_projection"}});
                             return top;
                           }(), kHfBlock};
const Table kHfSiglipText = {"text_model.encoder.layers.{i}.", [] {
                               auto top = kHfTextTop;
                               top.push_back({"proj", {"text_model.head"}});
                               return top;
                             }(), kHfBlock};

// open_clip's TimmModel keeps the timm model as `trunk`, and its own head (empty without timm_proj 'linear' or
// 'mlp' or an attention pool of its own, which its config reader refuses) beside it.
const std::string kTrunkPrefix = "visual.trunk.";

const Table& table(Layout l) {
  static const Table none = {"", {}, {}};  // timm's and OpenCLIP's timm trunks: timm's names (below a prefix)
  switch (l) {
    case Layout::HfViT: return kHfViT;
    case Layout::Torchvision: return kTorchvision;
    case Layout::HfDinov2: return kDinov2;
    case Layout::HfDinov2Registers: return kDinov2Registers;
    case Layout::HfClip: return kHfClip;
    case Layout::HfSiglip: return kHfSiglip;
    case Layout::OpenClip: return kOpenClip;
    case Layout::Timm:
    case Layout::OpenClipTimm: break;
  }
  return none;
}

StoredPart part(const std::string& name, int flags) {
  StoredPart p{name};
  p.transpose = flags & kTranspose;
  if (flags & (kFirstThird | kLastTwoThirds)) {  // in thirds of dim 0, resolved against the stored shape
    p.dim = 0;
    p.begin = flags & kFirstThird ? 0 : 1;
    p.end = flags & kFirstThird ? 1 : 3;
    p.thirds = true;
  }
  return p;
}

}  // namespace

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Timm: return "timm";
    case Layout::HfViT: return "Hugging Face";
    case Layout::Torchvision: return "torchvision";
    case Layout::HfDinov2: return "Hugging Face Dinov2Model";
    case Layout::HfDinov2Registers: return "Hugging Face Dinov2WithRegistersModel";
    case Layout::HfClip: return "Hugging Face CLIP vision";
    case Layout::HfSiglip: return "Hugging Face SigLIP vision";
    case Layout::OpenClip: return "OpenCLIP";
    case Layout::OpenClipTimm: return "OpenCLIP timm trunk";
  }
  return "?";
}

bool layout_family(Layout l, Family* f) {
  switch (l) {
    case Layout::HfDinov2:
    case Layout::HfDinov2Registers: *f = Family::DINOv2; return true;
    case Layout::HfClip:
    case Layout::OpenClip: *f = Family::Clip; return true;
    case Layout::HfSiglip: *f = Family::SigLIP; return true;
    case Layout::Timm:
    case Layout::HfViT:
    case Layout::Torchvision:
    case Layout::OpenClipTimm: break;
  }
  return false;
}

Layout detect_layout(const SafeTensors& st, const std::string& path) {
  if (st.has("embeddings.patch_embeddings.projection.weight") && st.has("embeddings.cls_token"))
    return st.has("embeddings.register_tokens") ? Layout::HfDinov2Registers : Layout::HfDinov2;
  if (st.has("vision_model.embeddings.patch_embedding.weight"))
    return st.has("vision_model.embeddings.class_embedding") ? Layout::HfClip : Layout::HfSiglip;
  if (st.has("visual.conv1.weight")) return Layout::OpenClip;
  if (st.has("visual.trunk.patch_embed.proj.weight")) return Layout::OpenClipTimm;
  if (st.has("vit.embeddings.patch_embeddings.projection.weight")) return Layout::HfViT;
  if (st.has("conv_proj.weight")) return Layout::Torchvision;
  if (st.has("patch_embed.proj.weight") || st.has("embeds.proj.weight")) return Layout::Timm;  // embeds: NaFlex ViTs
  throw Error(path, "not a ViT checkpoint: no patch embedding tensor (patch_embed.proj.weight, embeds.proj.weight, "
              "vit.embeddings.patch_embeddings.projection.weight or conv_proj.weight)");
}

namespace {

// Where a name is in a table's layout: each stored name after `top` (and for a block's, its block prefix).
StoredTensor from_table(const Table& t, const std::string& top, const std::string& timm_name) {
  StoredTensor out;
  static const std::regex re(R"(^(blocks\.(\d+)\.)?(.+)$)");
  std::smatch m;
  if (!std::regex_match(timm_name, m, re)) return out;
  std::string prefix = top;
  if (m[1].matched) {
    prefix += t.block_prefix;
    prefix.replace(prefix.find("{i}"), 3, m[2].str());
  }
  const std::string rest = m[3];
  for (const Rule& r : m[1].matched ? t.block : t.top) {
    std::string param;
    if (r.flags & kTensor) {
      if (rest != r.timm) continue;
    } else {
      const std::string mod = r.timm;
      if (rest != mod + ".weight" && rest != mod + ".bias") continue;
      param = rest.substr(mod.size() + 1);
    }
    for (const char* s : r.stored) {
      std::string name = prefix + s;
      if (!param.empty()) name += (name.back() == '_' ? "" : ".") + param;
      out.parts.push_back(part(name, r.flags));
    }
    out.lead_ones = r.lead_ones;
    return out;
  }
  return out;
}

}  // namespace

StoredTensor layout_tensor(Layout l, const std::string& timm_name) {
  if (l == Layout::Timm || l == Layout::OpenClipTimm) {  // timm's own names: the engine's
    StoredTensor out;
    out.parts.push_back(StoredPart{(l == Layout::OpenClipTimm ? kTrunkPrefix : "") + timm_name});
    return out;
  }
  StoredTensor out = from_table(table(l), "", timm_name);
  if (l == Layout::HfDinov2Registers && timm_name == "cls_token" && !out.parts.empty())
    out.add.push_back(StoredPart{"embeddings.position_embeddings", 1, 0, 1});
  if (l == Layout::HfDinov2Registers && timm_name == "pos_embed" && !out.parts.empty())
    out.parts[0] = {out.parts[0].name, 1, 1, -1};
  return out;
}

bool text_tower_prefix(Layout l, const SafeTensors& st, std::string* prefix) {
  switch (l) {
    case Layout::OpenClip:
    case Layout::OpenClipTimm:  // CustomTextCLIP's tower under `text.`, CLIP's at the top level
      for (const char* p : {"text.", ""})
        if (st.has(std::string(p) + "token_embedding.weight")) {
          *prefix = p;
          return true;
        }
      return false;
    case Layout::HfClip:
    case Layout::HfSiglip: *prefix = ""; return st.has("text_model.embeddings.token_embedding.weight");
    default: return false;
  }
}

StoredTensor text_layout_tensor(Layout l, const std::string& prefix, const std::string& name) {
  switch (l) {
    case Layout::OpenClip:
    case Layout::OpenClipTimm: return from_table(kOpenClipText, prefix, name);
    case Layout::HfClip: return from_table(kHfClipText, prefix, name);
    case Layout::HfSiglip: return from_table(kHfSiglipText, prefix, name);
    default: return {};
  }
}

bool text_layout_holds(Layout l, const std::string& prefix, const std::string& n) {
  const auto starts = [&](const std::string& p) { return n.rfind(p, 0) == 0; };
  if (n == "text_model.embeddings.position_ids" || n == prefix + "attn_mask") return false;  // buffers, not weights
  switch (l) {
    case Layout::OpenClip:
    case Layout::OpenClipTimm:
      if (!prefix.empty()) return starts(prefix);
      return starts("transformer.") || starts("token_embedding.") || starts("ln_final.") || n == "positional_embedding" ||
             starts("text_projection");
    case Layout::HfClip:
    case Layout::HfSiglip: return starts("text_model.") || starts("text_projection.");
    default: return false;
  }
}

bool layout_ignores(Layout l, const std::string& n) {
  const auto starts = [&](const char* p) { return n.rfind(p, 0) == 0; };
  switch (l) {
    case Layout::HfViT: return starts("vit.pooler.");
    case Layout::HfDinov2:
    case Layout::HfDinov2Registers: return n == "embeddings.mask_token";
    case Layout::HfClip:
    case Layout::HfSiglip:
      return starts("text_model.") || starts("text_projection.") || n == "logit_scale" || n == "logit_bias" ||
             n == "vision_model.embeddings.position_ids";
    case Layout::OpenClipTimm:  // CustomTextCLIP's text tower is `text`, CLIP's at the top as OpenCLIP's own
      if (starts("text.")) return true;
      [[fallthrough]];
    case Layout::OpenClip:
      return starts("transformer.") || starts("token_embedding.") || starts("ln_final.") ||
             n == "positional_embedding" || n == "text_projection" || n == "logit_scale" || n == "logit_bias" ||
             n == "attn_mask";
    case Layout::Timm:
    case Layout::Torchvision: break;
  }
  return false;
}

bool layout_head_has_bias(Layout l) { return l != Layout::HfClip && l != Layout::OpenClip; }  // timm trunks' head has one

bool layout_pos_antialias(Layout l) {
  // transformers' Dinov2 and its CLIP and SigLIP (interpolate_pos_encoding): bicubic, size given, no
  // antialiasing; Dinov2WithRegisters and open_clip's resize_pos_embed antialiased, as timm's resample, which
  // timm's, Hugging Face ViT's and torchvision's checkpoints get.
  return l != Layout::HfDinov2 && l != Layout::HfClip && l != Layout::HfSiglip;
}

}  // namespace vit
