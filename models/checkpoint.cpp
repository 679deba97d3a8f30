// Name tables from timm's ViT names to Hugging Face's and torchvision's, and checked tensor access.
#include "checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <regex>

#include "families.h"
#include "vit/error.h"

namespace vit {

const char* layout_name(CheckpointLayout l) {
  switch (l) {
    case CheckpointLayout::Timm: return "timm";
    case CheckpointLayout::HuggingFace: return "Hugging Face";
    case CheckpointLayout::Torchvision: return "torchvision";
    case CheckpointLayout::Other: return "other";
  }
  return "?";
}

Checkpoint::Checkpoint(const std::string& path) : st_(std::make_unique<SafeTensors>(path)) {
  const std::string family = unsupported_family(*st_);
  if (!family.empty()) throw Error(path, family + " checkpoint: not supported yet");
  other_ = detect_other_layout(*st_);
  if (other_ != OtherLayout::None) layout_ = CheckpointLayout::Other;
  else if (st_->has("vit.embeddings.patch_embeddings.projection.weight")) layout_ = CheckpointLayout::HuggingFace;
  else if (st_->has("conv_proj.weight")) layout_ = CheckpointLayout::Torchvision;
  else if (!st_->has("patch_embed.proj.weight") && !st_->has("embeds.proj.weight"))  // embeds: timm's NaFlex ViTs
    throw Error(path, "not a ViT checkpoint: no patch embedding tensor (patch_embed.proj.weight, embeds.proj.weight, "
                "vit.embeddings.patch_embeddings.projection.weight or conv_proj.weight)");
}

namespace {

// How timm's names read in the other layouts. Modules give their .weight and .bias; a block's modules
// sit under "blocks.{i}." in timm, "vit.encoder.layer.{i}." in Hugging Face and
// "encoder.layers.encoder_layer_{i}." in torchvision. Several Hugging Face names are concatenated along
// dim 0 (its q, k, v); a torchvision name ending in '_' takes the parameter name without a dot
// (in_proj_weight).
struct NameRule {
  const char* timm;
  std::vector<const char*> hf;
  const char* tv;
};

const NameRule kTensors[] = {
    {"cls_token", {"vit.embeddings.cls_token"}, "class_token"},
    {"pos_embed", {"vit.embeddings.position_embeddings"}, "encoder.pos_embedding"},
};
const NameRule kModules[] = {
    {"patch_embed.proj", {"vit.embeddings.patch_embeddings.projection"}, "conv_proj"},
    {"norm", {"vit.layernorm"}, "encoder.ln"},
    {"head", {"classifier"}, "heads.head"},
};
const NameRule kBlockModules[] = {
    {"norm1", {"layernorm_before"}, "ln_1"},
    {"attn.qkv", {"attention.attention.query", "attention.attention.key", "attention.attention.value"},
     "self_attention.in_proj_"},
    {"attn.proj", {"attention.output.dense"}, "self_attention.out_proj"},
    {"norm2", {"layernorm_after"}, "ln_2"},
    {"mlp.fc1", {"intermediate.dense"}, "mlp.0"},
    {"mlp.fc2", {"output.dense"}, "mlp.3"},
};

// A NaN or infinite weight makes every answer NaN: loaded still (a model is the user's to judge), but
// named now, where the cause can be seen, rather than only in results that are not numbers.
void warn_not_finite(const std::string& path, const std::string& name, const std::vector<float>& v) {
  const size_t bad = size_t(std::count_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); }));
  if (bad)
    spdlog::warn("{}: tensor {} holds {} value(s) that are not finite (NaN or infinity): the model's answers will "
                 "not be numbers", path, name, bad);
}

}  // namespace

std::string Checkpoint::layout_label() const {
  return layout_ == CheckpointLayout::Other ? other_layout_name(other_) : layout_name(layout_);
}

std::vector<int64_t> Checkpoint::part_shape(const StoredPart& p) const {
  std::vector<int64_t> s = st_->get(p.name).shape;
  if (p.dim >= 0) {
    if (p.dim >= int(s.size())) throw Error(path(), p.name + " has shape " + shape_string(s) + ", too few dimensions");
    const int64_t n = s[size_t(p.dim)];
    const int64_t b = p.thirds ? p.begin * n / 3 : p.begin, e = p.thirds ? p.end * n / 3 : p.end < 0 ? n : p.end;
    if ((p.thirds && n % 3) || b > e || e > n)
      throw Error(path(), p.name + " has shape " + shape_string(s) + ", too small for its parts");
    s[size_t(p.dim)] = e - b;
  }
  if (p.transpose) {
    if (s.size() != 2) throw Error(path(), p.name + " has shape " + shape_string(s) + ", expected 2 dimensions");
    std::swap(s[0], s[1]);
  }
  return s;
}

std::vector<float> Checkpoint::read_part(const StoredPart& p) {
  used_.insert(p.name);
  std::vector<float> v = st_->to_f32(p.name);
  const std::vector<int64_t> full = st_->get(p.name).shape, s = part_shape(p);
  if (p.dim >= 0) {
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < p.dim; ++d) outer *= full[size_t(d)];
    for (size_t d = size_t(p.dim) + 1; d < full.size(); ++d) inner *= full[d];
    const int64_t n = full[size_t(p.dim)], kept = s[size_t(p.dim)];
    const int64_t b = p.thirds ? p.begin * n / 3 : p.begin;
    std::vector<float> out;
    out.reserve(size_t(outer * kept * inner));
    for (int64_t o = 0; o < outer; ++o) {
      const auto* from = v.data() + (o * n + b) * inner;
      out.insert(out.end(), from, from + kept * inner);
    }
    v = std::move(out);
  }
  if (p.transpose) {
    const int64_t r = full[0], c = full[1];  // stored [r, c] -> [c, r]
    std::vector<float> t(v.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) t[size_t(j * r + i)] = v[size_t(i * c + j)];
    v = std::move(t);
  }
  return v;
}

bool Checkpoint::has_other(const StoredTensor& t) const {
  if (t.parts.empty()) return false;
  for (const auto* list : {&t.parts, &t.add})
    for (const StoredPart& p : *list)
      if (!st_->has(p.name)) return false;
  return true;
}

std::vector<std::string> Checkpoint::source_names(const std::string& timm_name) const {
  if (layout_ == CheckpointLayout::Timm) return {timm_name};
  if (layout_ == CheckpointLayout::Other) {
    std::vector<std::string> names;
    for (const StoredPart& p : other_layout_tensor(other_, timm_name).parts) names.push_back(p.name);
    return names;
  }
  const bool hf = layout_ == CheckpointLayout::HuggingFace;
  for (const NameRule& r : kTensors)
    if (timm_name == r.timm) return hf ? std::vector<std::string>{r.hf[0]} : std::vector<std::string>{r.tv};
  static const std::regex module_re(R"(^(blocks\.(\d+)\.)?(.+)\.(weight|bias)$)");
  std::smatch m;
  if (!std::regex_match(timm_name, m, module_re)) return {};
  const bool block = m[1].matched;
  const std::string module = m[3], param = m[4];
  const std::string prefix = !block ? ""
                             : hf   ? "vit.encoder.layer." + m[2].str() + "."
                                    : "encoder.layers.encoder_layer_" + m[2].str() + ".";
  const NameRule* first = block ? std::begin(kBlockModules) : std::begin(kModules);
  const NameRule* last = block ? std::end(kBlockModules) : std::end(kModules);
  for (const NameRule* r = first; r != last; ++r) {
    if (module != r->timm) continue;
    std::vector<std::string> out;
    if (hf)
      for (const char* name : r->hf) out.push_back(prefix + name + "." + param);
    else
      out.push_back(prefix + r->tv + (std::string(r->tv).back() == '_' ? "" : ".") + param);
    return out;
  }
  return {};  // no counterpart in this layout: the tensor is absent
}

bool Checkpoint::has(const std::string& timm_name) const {
  if (layout_ == CheckpointLayout::Other) return has_other(other_layout_tensor(other_, timm_name));
  const auto names = source_names(timm_name);
  if (names.empty()) return false;
  for (const auto& n : names)
    if (!st_->has(n)) return false;
  return true;
}

std::vector<int64_t> Checkpoint::shape(const std::string& timm_name) const {
  const auto names = source_names(timm_name);
  if (names.empty() || !has(timm_name)) throw Error(path(), "missing tensor " + timm_name);
  // Hugging Face's and torchvision's tensors have timm's shapes; Hugging Face's q, k, v stack on dim 0, and
  // must agree in every other dimension (else the stacked values would not fill the shape claimed).
  std::vector<std::vector<int64_t>> parts;
  const StoredTensor t = layout_ == CheckpointLayout::Other ? other_layout_tensor(other_, timm_name) : StoredTensor{};
  for (size_t i = 0; i < names.size(); ++i)
    parts.push_back(layout_ == CheckpointLayout::Other ? part_shape(t.parts[i]) : st_->get(names[i]).shape);
  std::vector<int64_t> s = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    if (s.empty() || parts[i].size() != s.size() || !std::equal(s.begin() + 1, s.end(), parts[i].begin() + 1))
      throw Error(path(), names[i] + " has shape " + shape_string(parts[i]) + ", which does not stack with " +
                              names[0] + "'s " + shape_string(parts[0]) + " into " + timm_name);
    s[0] += parts[i][0];
  }
  s.insert(s.begin(), size_t(t.lead_ones), 1);
  return s;
}

Checkpoint::Tensor Checkpoint::take(const std::string& timm_name, const std::vector<int64_t>& expected) {
  const auto names = source_names(timm_name);
  if (names.empty() || !has(timm_name)) {
    std::string where = names.empty() || names[0] == timm_name ? timm_name : names[0] + " (" + timm_name + ")";
    throw Error(path(), "missing tensor " + where);
  }
  const std::vector<int64_t> got = shape(timm_name);
  if (got != expected)
    throw Error(path(), "" + (names.size() == 1 ? names[0] : timm_name) + " has shape " + shape_string(got) +
                ", expected " + shape_string(expected));
  std::vector<float> values;
  if (layout_ == CheckpointLayout::Other) {
    const StoredTensor t = other_layout_tensor(other_, timm_name);
    for (const StoredPart& p : t.parts) {
      std::vector<float> part = read_part(p);
      values.insert(values.end(), part.begin(), part.end());
    }
    for (const StoredPart& p : t.add) {
      const std::vector<float> part = read_part(p);
      if (part.size() != values.size())
        throw Error(path(), p.name + ": the part added to " + timm_name + " has " + std::to_string(part.size()) +
                                " values, expected " + std::to_string(values.size()));
      for (size_t i = 0; i < values.size(); ++i) values[i] += part[i];
    }
    warn_not_finite(path(), names[0], values);
    return Tensor(std::move(values));
  }
  for (const auto& n : names) {
    used_.insert(n);
    std::vector<float> part = st_->to_f32(n);
    warn_not_finite(path(), n, part);
    if (values.empty()) values = std::move(part);
    else values.insert(values.end(), part.begin(), part.end());
  }
  return Tensor(std::move(values));
}

void Checkpoint::check_all_used() const {
  std::string unused;
  int count = 0;
  for (const auto& [name, t] : st_->tensors()) {
    if (used_.count(name) || name.rfind("vit.pooler.", 0) == 0) continue;  // HF's pooler feeds no classifier
    if (other_layout_ignores(other_, name)) continue;
    if (count++ < 5) unused += (unused.empty() ? "" : ", ") + name;
  }
  if (count)
    throw Error(path(), "" + std::to_string(count) + " tensor(s) the model does not use: " + unused +
                (count > 5 ? ", ..." : "") + " (not a ViT layout this engine knows)");
}

std::string Checkpoint::dtypes() const {
  std::set<std::string> names;
  for (const auto& [name, t] : st_->tensors()) names.insert(dtype_name(t.dtype));
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

int64_t Checkpoint::count_blocks() const {
  int64_t n = 0;
  while (has("blocks." + std::to_string(n) + ".norm1.weight")) ++n;
  return n;
}

}  // namespace vit
