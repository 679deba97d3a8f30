// Position tables computed rather than stored, each as timm computes it.
#include "positions.h"

#include <algorithm>
#include <cmath>

namespace vit {

// beit.py gen_relative_position_index(window_size): for patches i = (yi, xi), j = (yj, xj) the row
// (yi - yj + Wh - 1) * (2 Ww - 1) + (xi - xj + Ww - 1) of the table; the class token's own three rows,
// R - 3 (class to patch), R - 2 (patch to class) and R - 1 (class to class), close the table. [T, T], T = 1 + Wh Ww.
std::vector<int32_t> relative_position_index(int64_t Wh, int64_t Ww) {
  const int64_t N = Wh * Ww, T = N + 1, R = (2 * Wh - 1) * (2 * Ww - 1) + 3;
  std::vector<int32_t> index(size_t(T * T));
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j)
      index[size_t((1 + i) * T + 1 + j)] =
          int32_t((i / Ww - j / Ww + Wh - 1) * (2 * Ww - 1) + (i % Ww - j % Ww + Ww - 1));
  for (int64_t j = 0; j < T; ++j) index[size_t(j)] = int32_t(R - 3);      // relative_position_index[0, 0:]
  for (int64_t i = 0; i < T; ++i) index[size_t(i * T)] = int32_t(R - 2);  // relative_position_index[0:, 0]
  index[0] = int32_t(R - 1);
  return index;
}

// EVA-02's rotary angles, as timm's RotaryEmbeddingCat (in_pixels=False) builds them in float32
// (pos_embed_sincos.py): bands 1 / temperature^(i / (Dh/4)), i < Dh/4 (freq_bands(dim // 4, step=1));
// coordinates t = arange(s) + grid_offset, rescaled t / s * ref when ref_feat_shape is set (_build_grid,
// 'index' grid); angle = t * band. Per patch, in row-major (y, x) order: the Dh/4 y angles then the Dh/4 x
// angles ('ij'), or x's then y's ('xy': the grid's coordinate channels swapped), angle k turning channel pair
// (2k, 2k + 1) (_rope_layout, rotate_half=False).
void rotary_tables(const ViTConfig& c, std::vector<float>* sin, std::vector<float>* cos, const float* freqs) {
  if (c.rope.kind == RopeKind::Mixed) {
    const int64_t gh = c.grid_h(), gw = c.grid_w(), N = gh * gw, half = c.head_dim() / 2, tables = c.depth * c.heads;
    sin->assign(size_t(tables * N * half), 0.f);
    cos->assign(sin->size(), 0.f);
    for (int64_t t = 0; t < tables; ++t)  // block l, head h: t = l H + h, as freqs[0] and freqs[1] are laid out
      for (int64_t n = 0; n < N; ++n) {
        const float y = float(n / gw), x = float(n % gw), tx = c.rope.xy ? x : y, ty = c.rope.xy ? y : x;
        for (int64_t i = 0; i < half; ++i) {
          const float angle = tx * freqs[t * half + i] + ty * freqs[(tables + t) * half + i];
          (*sin)[size_t((t * N + n) * half + i)] = std::sin(angle);
          (*cos)[size_t((t * N + n) * half + i)] = std::cos(angle);
        }
      }
    return;
  }
  if (c.rope.kind == RopeKind::DinoV3)
    return dinov3_rotary_tables(c.grid_h(), c.grid_w(), c.head_dim(), c.rope.temperature, c.rope.grid_offset, sin, cos);
  const int64_t bands = c.head_dim() / 4, gh = c.grid_h(), gw = c.grid_w(), half = 2 * bands;
  std::vector<float> band(static_cast<size_t>(bands));
  for (int64_t i = 0; i < bands; ++i)
    band[size_t(i)] = 1.f / std::pow(c.rope.temperature, float(i) / float(bands));
  const auto coord = [&](int64_t i, int64_t size, int64_t ref) {
    const float t = float(i) + c.rope.grid_offset;
    return ref ? t / float(size) * float(ref) : t;
  };
  sin->assign(size_t(gh * gw * half), 0.f);
  cos->assign(sin->size(), 0.f);
  for (int64_t y = 0; y < gh; ++y)
    for (int64_t x = 0; x < gw; ++x) {
      const float ty = coord(y, gh, c.rope.ref_h), tx = coord(x, gw, c.rope.ref_w);
      for (int64_t k = 0; k < half; ++k) {
        const float angle = ((k < bands) != c.rope.xy ? ty : tx) * band[size_t(k % bands)];
        (*sin)[size_t((y * gw + x) * half + k)] = std::sin(angle);
        (*cos)[size_t((y * gw + x) * half + k)] = std::cos(angle);
      }
    }
}

// RotaryEmbeddingDinoV3._create_embed(feat_shape, no_aug=True), step by step in float32 as timm runs it:
// _build_grid(grid_type='centered', normalize_coords='separate', 'ij'): t = (arange(0.5, s) + offset) / s,
// then 2 t - 1; _compute_periods: temperature ** (2 arange(Dh/4) / (Dh/2)); _get_pos_embed_from_coords:
// angles = 2 pi coords[:, :, None] / periods, flattened (y's Dh/4 angles, then x's); _rope_layout(rotate_half)
// repeats them for the second half of the channels, which the Half rotary step reads from the same row.
void dinov3_rotary_tables(int64_t gh, int64_t gw, int64_t Dh, float temperature, float grid_offset,
                          std::vector<float>* sin, std::vector<float>* cos) {
  const int64_t bands = Dh / 4, half = Dh / 2;
  std::vector<float> period(static_cast<size_t>(bands));
  for (int64_t k = 0; k < bands; ++k) period[size_t(k)] = std::pow(temperature, 2.f * float(k) / float(half));
  const auto coord = [&](int64_t i, int64_t size) {
    const float t = (float(i) + 0.5f + grid_offset) / float(size);
    return 2.f * t - 1.f;
  };
  const float two_pi = float(2.0 * M_PI);
  sin->assign(size_t(gh * gw * half), 0.f);
  cos->assign(sin->size(), 0.f);
  for (int64_t y = 0; y < gh; ++y)
    for (int64_t x = 0; x < gw; ++x) {
      const float ty = coord(y, gh), tx = coord(x, gw);
      for (int64_t k = 0; k < half; ++k) {
        const float angle = two_pi * (k < bands ? ty : tx) / period[size_t(k % bands)];
        (*sin)[size_t((y * gw + x) * half + k)] = std::sin(angle);
        (*cos)[size_t((y * gw + x) * half + k)] = std::cos(angle);
      }
    }
}

namespace {

// resize_rel_pos_bias_table's _calc(src, dst): the source table's offsets placed on a geometric
// progression whose half spans the target's half, q found by bisection in double as Python does it;
// then as torch.tensor makes them, float32.
std::vector<float> source_offsets(int64_t src, int64_t dst) {
  const auto geometric_progression = [](double a, double r, int64_t n) { return a * (1.0 - std::pow(r, double(n))) / (1.0 - r); };
  double left = 1.01, right = 1.5, q = 0;
  while (right - left > 1e-6) {
    q = (left + right) / 2.0;
    if (geometric_progression(1, q, src / 2) > double(dst / 2)) right = q;
    else left = q;
  }
  std::vector<double> dis;
  double cur = 1;
  for (int64_t i = 0; i < src / 2; ++i) {
    dis.push_back(cur);
    cur += std::pow(q, double(i + 1));
  }
  std::vector<float> out;
  for (auto it = dis.rbegin(); it != dis.rend(); ++it) out.push_back(float(-*it));
  out.push_back(0.f);
  for (double d : dis) out.push_back(float(d));
  return out;
}

// One axis of timm's RegularGridInterpolator (layers/interpolate.py) at x: the neighbours
// (torch.bucketize, clamped) and the distances to them, in float32; outside the points the nearest
// edge's value.
struct Neighbours {
  int64_t left, right;
  float to_left, to_right;
};
Neighbours neighbours(const std::vector<float>& p, float x) {
  const int64_t n = int64_t(p.size());
  Neighbours b{};
  b.right = int64_t(std::lower_bound(p.begin(), p.end(), x) - p.begin());  // bucketize(right=False)
  if (b.right >= n) b.right = n - 1;
  b.left = std::min(std::max<int64_t>(b.right - 1, 0), n - 1);
  b.to_left = std::max(x - p[size_t(b.left)], 0.f);
  b.to_right = std::max(p[size_t(b.right)] - x, 0.f);
  if (b.to_left == 0.f && b.to_right == 0.f) b.to_left = b.to_right = 1.f;
  return b;
}

}  // namespace

std::vector<float> resize_relative_position_table(const std::vector<float>& table, int64_t H, int64_t W, int64_t Wh,
                                                  int64_t Ww) {
  const int64_t src = 2 * W - 1, dst_h = 2 * Wh - 1, dst_w = 2 * Ww - 1;
  if (src == dst_h && src == dst_w) return table;
  const std::vector<float> py = source_offsets(src, dst_h), px = source_offsets(src, dst_w);
  std::vector<float> out(size_t((dst_h * dst_w + 3) * H));
  // dy = torch.arange(-ty, ty + 0.1, 1.0), ty = dst // 2: the target's integer offsets.
  for (int64_t i = 0; i < dst_h; ++i)
    for (int64_t j = 0; j < dst_w; ++j) {
      const Neighbours y = neighbours(py, float(i - dst_h / 2)), x = neighbours(px, float(j - dst_w / 2));
      const int64_t ys[2] = {y.left, y.right}, xs[2] = {x.left, x.right};
      const float dys[2] = {y.to_left, y.to_right}, dxs[2] = {x.to_left, x.to_right};
      for (int64_t h = 0; h < H; ++h) {
        // sum over corners (a, b) in product([0, 1], repeat=2) of values[a, b] * dist_y[1 - a] * dist_x[1 - b]
        float numerator = 0.f;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b)
            numerator += table[size_t((ys[a] * src + xs[b]) * H + h)] * (dys[1 - a] * dxs[1 - b]);
        out[size_t((i * dst_w + j) * H + h)] = numerator / ((y.to_left + y.to_right) * (x.to_left + x.to_right));
      }
    }
  std::copy(table.end() - 3 * H, table.end(), out.end() - 3 * H);  // the class token's rows
  return out;
}

}  // namespace vit
