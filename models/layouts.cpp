// The name tables of the layouts in layouts.h, each from its own model code: transformers' modeling_dinov2.py,
// modeling_dinov2_with_registers.py, modeling_clip.py, modeling_siglip.py, and open_clip's transformer.py
// (VisionTransformer). Modules give their .weight and .bias; a stored name ending in '_' takes the parameter
// name without a dot (nn.MultiheadAttention's in_proj_weight).
#include "layouts.h"

#include <regex>

#include "engine/io/safetensors.h"

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

const Table& table(OtherLayout l) {
  // transformers' Dinov2Layer: norm1, attention (Dinov2SelfAttention + Dinov2SelfOutput), layer_scale1,
  // norm2, mlp (Dinov2MLP: fc1, act, fc2), layer_scale2.
  static const std::vector<Rule> dinov2_block = {
      {"norm1", {"norm1"}},
      {"attn.qkv", {"attention.attention.query", "attention.attention.key", "attention.attention.value"}},
      {"attn.proj", {"attention.output.dense"}},
      {"ls1.gamma", {"layer_scale1.lambda1"}, kTensor},
      {"norm2", {"norm2"}},
      {"mlp.fc1", {"mlp.fc1"}},
      {"mlp.fc2", {"mlp.fc2"}},
      {"ls2.gamma", {"layer_scale2.lambda1"}, kTensor},
  };
  static const Table dinov2 = {"encoder.layer.{i}.",
                               {{"patch_embed.proj", {"embeddings.patch_embeddings.projection"}},
                                {"cls_token", {"embeddings.cls_token"}, kTensor},
                                {"pos_embed", {"embeddings.position_embeddings"}, kTensor},
                                {"norm", {"layernorm"}}},
                               dinov2_block};
  // Dinov2WithRegistersEmbeddings: the position table covers the class token and the patches, the
  // registers come after it has been added: as timm's no_embed_class, the class slot folded into cls_token.
  static const Table dinov2_reg = {"encoder.layer.{i}.",
                                   {{"patch_embed.proj", {"embeddings.patch_embeddings.projection"}},
                                    {"cls_token", {"embeddings.cls_token"}, kTensor},
                                    {"reg_token", {"embeddings.register_tokens"}, kTensor},
                                    {"pos_embed", {"embeddings.position_embeddings"}, kTensor},
                                    {"norm", {"layernorm"}}},
                                   dinov2_block};
  // CLIPEncoderLayer and SiglipEncoderLayer: layer_norm1, self_attn (q/k/v/out_proj), layer_norm2, mlp.
  static const std::vector<Rule> hf_block = {
      {"norm1", {"layer_norm1"}},
      {"attn.qkv", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}},
      {"attn.proj", {"self_attn.out_proj"}},
      {"norm2", {"layer_norm2"}},
      {"mlp.fc1", {"mlp.fc1"}},
      {"mlp.fc2", {"mlp.fc2"}},
  };
  // CLIPVisionTransformer: pre_layrnorm (sic) before the encoder; post_layernorm on the pooled class token
  // only (timm's fc_norm: last_hidden_state stays unnormalised); visual_projection without a bias.
  static const Table hf_clip = {"vision_model.encoder.layers.{i}.",
                                {{"patch_embed.proj", {"vision_model.embeddings.patch_embedding"}},
                                 {"cls_token", {"vision_model.embeddings.class_embedding"}, kTensor, 2},
                                 {"pos_embed", {"vision_model.embeddings.position_embedding.weight"}, kTensor, 1},
                                 {"norm_pre", {"vision_model.pre_layrnorm"}},
                                 {"fc_norm", {"vision_model.post_layernorm"}},
                                 {"head", {"visual_projection"}}},
                                hf_block};
  // SiglipVisionTransformer: no class token; post_layernorm over all tokens, then the attention-pool head
  // (SiglipMultiheadAttentionPoolingHead: probe, nn.MultiheadAttention with q, k, v stacked in in_proj,
  // layernorm, mlp).
  static const Table hf_siglip = {
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
      hf_block};
  // open_clip's VisionTransformer: conv1 (no bias), class_embedding, positional_embedding, ln_pre, the
  // resblocks (ResidualAttentionBlock: ln_1, attn, ls_1, ln_2, mlp c_fc/c_proj, ls_2), ln_post over all
  // tokens, and pooled @ proj: proj is [D, E], timm's head.weight transposed.
  static const Table openclip = {"visual.transformer.resblocks.{i}.",
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
  static const Table none = {"", {}, {}};
  switch (l) {
    case OtherLayout::HfDinov2: return dinov2;
    case OtherLayout::HfDinov2Registers: return dinov2_reg;
    case OtherLayout::HfClip: return hf_clip;
    case OtherLayout::HfSiglip: return hf_siglip;
    case OtherLayout::OpenClip: return openclip;
    case OtherLayout::None: break;
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

const char* other_layout_name(OtherLayout l) {
  switch (l) {
    case OtherLayout::HfDinov2: return "Hugging Face Dinov2Model";
    case OtherLayout::HfDinov2Registers: return "Hugging Face Dinov2WithRegistersModel";
    case OtherLayout::HfClip: return "Hugging Face CLIP vision";
    case OtherLayout::HfSiglip: return "Hugging Face SigLIP vision";
    case OtherLayout::OpenClip: return "OpenCLIP";
    case OtherLayout::None: break;
  }
  return "timm";
}

Family other_layout_family(OtherLayout l) {
  switch (l) {
    case OtherLayout::HfDinov2:
    case OtherLayout::HfDinov2Registers: return Family::DINOv2;
    case OtherLayout::HfClip:
    case OtherLayout::OpenClip: return Family::Clip;
    case OtherLayout::HfSiglip: return Family::SigLIP;
    case OtherLayout::None: break;
  }
  return Family::ViT;
}

OtherLayout detect_other_layout(const SafeTensors& st) {
  if (st.has("embeddings.patch_embeddings.projection.weight") && st.has("embeddings.cls_token"))
    return st.has("embeddings.register_tokens") ? OtherLayout::HfDinov2Registers : OtherLayout::HfDinov2;
  if (st.has("vision_model.embeddings.patch_embedding.weight"))
    return st.has("vision_model.embeddings.class_embedding") ? OtherLayout::HfClip : OtherLayout::HfSiglip;
  if (st.has("visual.conv1.weight")) return OtherLayout::OpenClip;
  return OtherLayout::None;
}

StoredTensor other_layout_tensor(OtherLayout l, const std::string& timm_name) {
  static const std::regex re(R"(^(blocks\.(\d+)\.)?(.+)$)");
  std::smatch m;
  StoredTensor out;
  if (l == OtherLayout::None || !std::regex_match(timm_name, m, re)) return out;
  const Table& t = table(l);
  std::string prefix;
  if (m[1].matched) {
    prefix = t.block_prefix;
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
    if (l == OtherLayout::HfDinov2Registers && rest == "cls_token")
      out.add.push_back(StoredPart{"embeddings.position_embeddings", 1, 0, 1});
    if (l == OtherLayout::HfDinov2Registers && rest == "pos_embed") out.parts[0] = {out.parts[0].name, 1, 1, -1};
    return out;
  }
  return out;
}

bool other_layout_ignores(OtherLayout l, const std::string& n) {
  const auto starts = [&](const char* p) { return n.rfind(p, 0) == 0; };
  switch (l) {
    case OtherLayout::HfDinov2:
    case OtherLayout::HfDinov2Registers: return n == "embeddings.mask_token";
    case OtherLayout::HfClip:
    case OtherLayout::HfSiglip:
      return starts("text_model.") || starts("text_projection.") || n == "logit_scale" || n == "logit_bias" ||
             n == "vision_model.embeddings.position_ids";
    case OtherLayout::OpenClip:
      return starts("transformer.") || starts("token_embedding.") || starts("ln_final.") ||
             n == "positional_embedding" || n == "text_projection" || n == "logit_scale" || n == "logit_bias" ||
             n == "attn_mask";
    case OtherLayout::None: break;
  }
  return false;
}

bool other_layout_head_has_bias(OtherLayout l) { return l != OtherLayout::HfClip && l != OtherLayout::OpenClip; }

}  // namespace vit
