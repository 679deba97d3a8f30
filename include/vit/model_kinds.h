// The kinds of model part both the library's public API (vit/vit.h: ClassifierOptions::pool, ModelInfo::head)
// and the models floor below it branch on: how tokens are pooled, what the head is. Defined in models/
// (models/model_kinds.cpp). Standard types only.
#pragma once

namespace vit {

// How a model pools its tokens into the head's input: the class token's row, the mean of the patch tokens,
// or an attention pool (SigLIP's MAP head, attn_pool). The CLI's --pool and Python's pool= say cls, mean, map.
enum class Pool { Token, Avg, Map };
const char* pool_name(Pool p);  // timm's global_pool names: "token", "avg", "map"

// What a model's head is: a classifier over labels, a projection into a joint image-text space (a CLIP
// tower's: it labels nothing without text embeddings), or none (embeddings only: DINOv2, a SigLIP tower).
enum class HeadKind { None, Classifier, Projection };
const char* head_kind_name(HeadKind k);  // "none", "classifier", "projection"

}  // namespace vit
