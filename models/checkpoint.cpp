// Name tables from timm's ViT names to Hugging Face's and torchvision's, and checked tensor access.
#include "checkpoint.h"

#include <regex>

#include "engine/error.h"

namespace vit {

const char* layout_name(CheckpointLayout l) {
  switch (l) {
    case CheckpointLayout::Timm: return "timm";
    case CheckpointLayout::HuggingFace: return "Hugging Face";
    case CheckpointLayout::Torchvision: return "torchvision";
  }
  return "?";
}

std::string shape_to_string(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

Checkpoint::Checkpoint(const std::string& path) : st_(std::make_unique<SafeTensors>(path)) {
  if (st_->has("vit.embeddings.patch_embeddings.projection.weight")) layout_ = CheckpointLayout::HuggingFace;
  else if (st_->has("conv_proj.weight")) layout_ = CheckpointLayout::Torchvision;
  else if (!st_->has("patch_embed.proj.weight"))
    throw Error(path + ": not a ViT checkpoint: no patch embedding tensor (patch_embed.proj.weight, "
                "vit.embeddings.patch_embeddings.projection.weight or conv_proj.weight)");
}

// Each row: a timm name pattern and the names it comes from in the other layouts ({} is the block
// index; several names are concatenated along dim 0, as Hugging Face splits qkv into three).
struct NameRule {
  const char* timm;
  std::vector<const char*> hf, tv;
};

static const std::vector<NameRule>& name_rules() {
  static const std::vector<NameRule> rules = {
      {"cls_token", {"vit.embeddings.cls_token"}, {"class_token"}},
      {"pos_embed", {"vit.embeddings.position_embeddings"}, {"encoder.pos_embedding"}},
      {"patch_embed.proj.weight", {"vit.embeddings.patch_embeddings.projection.weight"}, {"conv_proj.weight"}},
      {"patch_embed.proj.bias", {"vit.embeddings.patch_embeddings.projection.bias"}, {"conv_proj.bias"}},
      {"blocks.{}.norm1.weight", {"vit.encoder.layer.{}.layernorm_before.weight"}, {"encoder.layers.encoder_layer_{}.ln_1.weight"}},
      {"blocks.{}.norm1.bias", {"vit.encoder.layer.{}.layernorm_before.bias"}, {"encoder.layers.encoder_layer_{}.ln_1.bias"}},
      {"blocks.{}.attn.qkv.weight",
       {"vit.encoder.layer.{}.attention.attention.query.weight", "vit.encoder.layer.{}.attention.attention.key.weight",
        "vit.encoder.layer.{}.attention.attention.value.weight"},
       {"encoder.layers.encoder_layer_{}.self_attention.in_proj_weight"}},
      {"blocks.{}.attn.qkv.bias",
       {"vit.encoder.layer.{}.attention.attention.query.bias", "vit.encoder.layer.{}.attention.attention.key.bias",
        "vit.encoder.layer.{}.attention.attention.value.bias"},
       {"encoder.layers.encoder_layer_{}.self_attention.in_proj_bias"}},
      {"blocks.{}.attn.proj.weight", {"vit.encoder.layer.{}.attention.output.dense.weight"}, {"encoder.layers.encoder_layer_{}.self_attention.out_proj.weight"}},
      {"blocks.{}.attn.proj.bias", {"vit.encoder.layer.{}.attention.output.dense.bias"}, {"encoder.layers.encoder_layer_{}.self_attention.out_proj.bias"}},
      {"blocks.{}.norm2.weight", {"vit.encoder.layer.{}.layernorm_after.weight"}, {"encoder.layers.encoder_layer_{}.ln_2.weight"}},
      {"blocks.{}.norm2.bias", {"vit.encoder.layer.{}.layernorm_after.bias"}, {"encoder.layers.encoder_layer_{}.ln_2.bias"}},
      {"blocks.{}.mlp.fc1.weight", {"vit.encoder.layer.{}.intermediate.dense.weight"}, {"encoder.layers.encoder_layer_{}.mlp.0.weight"}},
      {"blocks.{}.mlp.fc1.bias", {"vit.encoder.layer.{}.intermediate.dense.bias"}, {"encoder.layers.encoder_layer_{}.mlp.0.bias"}},
      {"blocks.{}.mlp.fc2.weight", {"vit.encoder.layer.{}.output.dense.weight"}, {"encoder.layers.encoder_layer_{}.mlp.3.weight"}},
      {"blocks.{}.mlp.fc2.bias", {"vit.encoder.layer.{}.output.dense.bias"}, {"encoder.layers.encoder_layer_{}.mlp.3.bias"}},
      {"norm.weight", {"vit.layernorm.weight"}, {"encoder.ln.weight"}},
      {"norm.bias", {"vit.layernorm.bias"}, {"encoder.ln.bias"}},
      {"head.weight", {"classifier.weight"}, {"heads.head.weight"}},
      {"head.bias", {"classifier.bias"}, {"heads.head.bias"}},
  };
  return rules;
}

std::vector<std::string> Checkpoint::source_names(const std::string& timm_name) const {
  if (layout_ == CheckpointLayout::Timm) return {timm_name};
  static const std::regex block_re(R"(^blocks\.(\d+)\.)");
  std::smatch m;
  std::string pattern = timm_name, index;
  if (std::regex_search(timm_name, m, block_re)) {
    index = m[1];
    pattern = "blocks.{}." + m.suffix().str();
  }
  for (const NameRule& r : name_rules()) {
    if (pattern != r.timm) continue;
    std::vector<std::string> out;
    for (const char* src : layout_ == CheckpointLayout::HuggingFace ? r.hf : r.tv) {
      std::string s = src;
      const auto pos = s.find("{}");
      if (pos != std::string::npos) s.replace(pos, 2, index);
      out.push_back(s);
    }
    return out;
  }
  return {};  // no counterpart in this layout: the tensor is absent
}

bool Checkpoint::has(const std::string& timm_name) const {
  const auto names = source_names(timm_name);
  if (names.empty()) return false;
  for (const auto& n : names)
    if (!st_->has(n)) return false;
  return true;
}

std::vector<int64_t> Checkpoint::shape(const std::string& timm_name) const {
  const auto names = source_names(timm_name);
  if (names.empty() || !has(timm_name)) throw Error(path() + ": missing tensor " + timm_name);
  std::vector<int64_t> s = st_->get(names[0]).shape;
  for (size_t i = 1; i < names.size(); ++i) s[0] += st_->get(names[i]).shape[0];
  // Hugging Face's and torchvision's tensors have timm's shapes; Hugging Face's q, k, v stack on dim 0.
  return s;
}

Checkpoint::Tensor Checkpoint::take(const std::string& timm_name, const std::vector<int64_t>& expected) {
  const auto names = source_names(timm_name);
  if (names.empty() || !has(timm_name)) {
    std::string where = names.empty() || names[0] == timm_name ? timm_name : names[0] + " (" + timm_name + ")";
    throw Error(path() + ": missing tensor " + where);
  }
  const std::vector<int64_t> got = shape(timm_name);
  if (got != expected)
    throw Error(path() + ": " + (names.size() == 1 ? names[0] : timm_name) + " has shape " + shape_to_string(got) +
                ", expected " + shape_to_string(expected));
  Tensor t;
  t.st_ = st_.get();
  t.names_ = names;
  for (const auto& n : names) {
    st_->prefetch(n);
    used_.insert(n);
  }
  t.view_ = names.size() == 1 ? st_->f32_view(names[0]) : nullptr;
  if (!t.view_)
    for (const auto& n : names) {
      std::vector<float> part = st_->to_f32(n);
      t.owned_.insert(t.owned_.end(), part.begin(), part.end());
    }
  t.size_ = 1;
  for (int64_t d : expected) t.size_ *= size_t(d);
  return t;
}

Checkpoint::Tensor& Checkpoint::Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    st_ = o.st_;
    names_ = std::move(o.names_);
    view_ = o.view_;
    owned_ = std::move(o.owned_);
    size_ = o.size_;
    o.st_ = nullptr;
    o.names_.clear();
    o.view_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

Checkpoint::Tensor::~Tensor() {
  if (st_)
    for (const auto& n : names_) st_->release(n);
}

void Checkpoint::check_all_used() const {
  std::string unused;
  int count = 0;
  for (const auto& [name, t] : st_->tensors()) {
    if (used_.count(name) || name.rfind("vit.pooler.", 0) == 0) continue;  // HF's pooler feeds no classifier
    if (count++ < 5) unused += (unused.empty() ? "" : ", ") + name;
  }
  if (count)
    throw Error(path() + ": " + std::to_string(count) + " tensor(s) the model does not use: " + unused +
                (count > 5 ? ", ..." : "") + " (not a ViT layout this engine knows)");
}

int64_t Checkpoint::count_blocks() const {
  int64_t n = 0;
  while (has("blocks." + std::to_string(n) + ".norm1.weight")) ++n;
  return n;
}

}  // namespace vit
