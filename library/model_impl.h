// vit::Model's insides (vit/model.h), shared by the library's Classifier and Explainer: the network, a pool of
// its forward passes, a second pool of passes that keep every block's attention (made at the first explain),
// the labels or zero-shot text embeddings, and the thread count every call runs with.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "library/model_info.h"
#include "library/runner.h"
#include "library/zero_shot.h"
#include "models/network.h"
#include "vit/model.h"
#include "vit/threads.h"

namespace vit {

struct Model::Impl {
  Impl(ViT n, const LoadOptions& o, int t) : network(std::move(n)), opt(o), threads(t), plans(network) {}
  ViT network;  // declared before the pools, which point at it
  LoadOptions opt;
  int threads = 1;
  PlanPool plans;
  std::vector<std::string> labels;
  std::unique_ptr<ZeroShot> zero_shot;  // with LoadOptions::text_embeddings

  // Each call runs with the model's thread count, whichever thread it comes from (OpenMP's count is per
  // thread, and a Plan's primitives are made for one count).
  void use_threads() const { set_threads(threads); }
  // A projection into a joint image-text space labels nothing without text embeddings.
  int64_t classes() const {
    const ViTConfig& c = network.config();
    return zero_shot ? zero_shot->classes() : c.pool.head == HeadKind::Classifier ? c.classes : 0;
  }
  // The width of a row of Classifier::logits(): the zero-shot scores, else timm's model(x) (the head's
  // output, or without a head the pooled features).
  int64_t logits_size() const {
    const ViTConfig& c = network.config();
    return zero_shot ? zero_shot->classes() : c.classes > 0 ? c.classes : c.width;
  }
  // Row `row` of a batch's logits: timm's model(x) (a classifier's logits, a projection, or the pooled
  // features of a model without a head), or with zero-shot labels its scores (written into `scores`).
  const float* logits(const ViT::Plan& plan, int64_t row, std::vector<float>& scores) const {
    const ViTConfig& c = network.config();
    const int64_t E = c.classes > 0 ? c.classes : c.width;
    const float* out = (c.classes > 0 ? plan.logits() : plan.features()) + row * E;
    if (!zero_shot) return out;
    scores.resize(size_t(zero_shot->classes()));
    zero_shot->score(out, scores.data());
    return scores.data();
  }
  // Passes that keep every block's attention, at the model's precision, made at the first call.
  const PlanPool& attention_plans() const {
    std::call_once(attention_once_, [this] { attention_ = std::make_unique<PlanPool>(network, ViT::PlanOptions{true}); });
    return *attention_;
  }
  const ModelInfo& info() const {
    std::call_once(info_once_, [this] {
      use_threads();
      info_ = model_info(network);
    });
    return info_;
  }

 private:
  mutable std::once_flag attention_once_, info_once_;
  mutable std::unique_ptr<PlanPool> attention_;
  mutable ModelInfo info_;
};

}  // namespace vit
