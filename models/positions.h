// Position tables that are computed rather than stored, as timm computes them: BEiT's relative position
// index and its tables resized for another grid (beit.py, layers/pos_embed_rel.py), and EVA-02's rotary
// angles (layers/pos_embed_sincos.py) and DINOv3's (RotaryEmbeddingDinoV3).
#pragma once
#include <cstdint>
#include <vector>

#include "vit_config.h"

namespace vit {

// beit.py gen_relative_position_index((Wh, Ww)): each token pair's row of a relative position table,
// [T, T] with T = 1 + Wh Ww (the class token first).
std::vector<int32_t> relative_position_index(int64_t Wh, int64_t Ww);

// timm's resize_rel_pos_bias_table (without scipy): a table [(2W - 1)^2 + 3, H] for a square W x W window,
// resampled for an Wh x Ww one, [(2Wh - 1)(2Ww - 1) + 3, H]; the class token's 3 rows kept.
std::vector<float> resize_relative_position_table(const std::vector<float>& table, int64_t H, int64_t W, int64_t Wh,
                                                  int64_t Ww);

// The model's rotary angles for its input grid (EVA-02's, or DINOv3's by c.rope.kind): sin and cos [N, Dh / 2],
// one row per patch. RoPE-Mixed's from its learned frequencies freqs [2, depth, H, Dh / 2] (timm's rope.freqs:
// x's, then y's): [depth, H, N, Dh / 2], a table per block and head, the angle of pair i of head h in block l
// at patch (x, y) t_x f[0, l, h, i] + t_y f[1, l, h, i] in float32 as timm's get_mixed_freqs (t_x = x, t_y = y
// on an 'xy' grid, swapped on an 'ij' one).
void rotary_tables(const ViTConfig& c, std::vector<float>* sin, std::vector<float>* cos, const float* freqs = nullptr);

// DINOv3's rotary angles (timm's RotaryEmbeddingDinoV3, no augmentation) for a gh x gw patch grid, heads of
// Dh channels: sin and cos [gh gw, Dh / 2], one row per patch in row-major (y, x) order, the Dh/4 y angles
// then the Dh/4 x angles, angle i turning channels (i, i + Dh/2) (the rotate-half layout). Coordinates are
// the patch centres normalised to the grid, (i + 0.5 + offset) / size mapped to [-1, 1]; periods
// temperature^(2k / (Dh/2)), k < Dh/4; angle 2 pi coordinate / period.
void dinov3_rotary_tables(int64_t gh, int64_t gw, int64_t Dh, float temperature, float grid_offset,
                          std::vector<float>* sin, std::vector<float>* cos);

}  // namespace vit
