// What the engine understood of a loaded model, as the public ModelInfo (vit/vit.h) says it: what
// Classifier::info(), Explainer::info() and `vit inspect` report.
#pragma once
#include "models/network.h"
#include "vit/vit.h"

namespace vit {

ModelInfo model_info(const ViT& model);

}  // namespace vit
