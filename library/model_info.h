// What the engine understood of a loaded model, as the public ModelInfo (vit/vit.h) says it: what
// Classifier::info(), Explainer::info() and `vit inspect` report.
#pragma once
#include "library/runner.h"
#include "models/network.h"
#include "vit/vit.h"

namespace vit {

// plans: the caller's pool, from which a Plan for one image is taken (and given back) to count its FLOPs.
ModelInfo model_info(const ViT& model, const PlanPool& plans);

}  // namespace vit
