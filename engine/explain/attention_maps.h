// What a transformer looked at, from its softmax attention probabilities: attention rollout (Abnar &
// Zuidema 2020, as jacobgil's vit-explain computes it with head_fusion=mean, discard_ratio=0) and one
// block's attention of the answering token per head. Model-agnostic: each block is [H, T, T], rows summing
// to 1, of which the first `prefix` tokens (class, distillation) are not image patches.
#pragma once
#include <cstdint>
#include <vector>

namespace vit {

// Whose attention explains the answer: the class token's (row 0), or, for a model without one (its
// answer pools all patch tokens), the mean of all rows: every token's attention, weighted equally.
enum class Query { ClassToken, MeanOfRows };

// Rollout for one image: blocks[l] is block l's attention [H, T, T]. A_l = the mean over heads;
// Â_l = 0.5 A_l + 0.5 I, rows renormalised to sum 1; R = Â_L ... Â_1; the map is the query's row of R
// over the patch tokens (columns prefix .. T-1), divided by its maximum. Returns [T - prefix].
std::vector<float> attention_rollout(const std::vector<const float*>& blocks, int64_t H, int64_t T, int64_t prefix,
                                     Query query);

// One block's attention [H, T, T] of the query over the patch tokens, per head, as it is (not
// normalised): [H, T - prefix].
std::vector<float> query_attention(const float* block, int64_t H, int64_t T, int64_t prefix, Query query);

}  // namespace vit
