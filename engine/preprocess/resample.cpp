// Pillow-exact resampling; the comments quote the Pillow 9.4 Resample.c lines each step mirrors.
#include "engine/preprocess/resample.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "vit/error.h"

namespace vit {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Resample.c PRECISION_BITS

double box_filter(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }
double bilinear_filter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming_filter(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x *= M_PI;
  return std::sin(x) / x * (0.54 + 0.46 * std::cos(x));
}
double bicubic_filter(double x) {  // a = -0.5, as Pillow (and torch's antialiased bicubic)
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double sinc_filter(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}
double lanczos_filter(double x) {
  return (-3.0 <= x && x < 3.0) ? sinc_filter(x) * sinc_filter(x / 3) : 0.0;
}

struct FilterDef {
  double (*fn)(double);
  double support;
};

FilterDef filter_def(Filter f) {
  switch (f) {
    case Filter::Box: return {box_filter, 0.5};
    case Filter::Bilinear: return {bilinear_filter, 1.0};
    case Filter::Hamming: return {hamming_filter, 1.0};
    case Filter::Bicubic: return {bicubic_filter, 2.0};
    case Filter::Lanczos: return {lanczos_filter, 3.0};
    case Filter::Nearest: break;
  }
  throw Error("internal: nearest has no filter kernel");
}

// precompute_coeffs(): for each output pixel of [first, first + count), the first input index, the tap
// count and the weights. Only the window a crop keeps: an image of extreme shape (4 x 888888, say) would
// otherwise need gigabytes of weights for output pixels that are cropped away.
struct Coeffs {
  int ksize = 0, first = 0;
  std::vector<int> bounds;  // [count, 2]: xmin, xmax (count)
  std::vector<double> k;    // [count, ksize]
};

Coeffs precompute_coeffs(int in_size, int out_size, Filter f, int first = 0, int count = -1) {
  if (count < 0) count = out_size;
  const FilterDef def = filter_def(f);
  const double scale = double(float(in_size)) / out_size;  // box[] is float in Pillow
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = def.support * filterscale;
  Coeffs c;
  c.ksize = int(std::ceil(support)) * 2 + 1;
  c.first = first;
  c.bounds.resize(size_t(count) * 2);
  c.k.assign(size_t(count) * c.ksize, 0.0);
  for (int xx = first; xx < first + count; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = int(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double* k = &c.k[size_t(xx - first) * c.ksize];
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double w = def.fn((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x)
      if (ww != 0.0) k[x] /= ww;
    c.bounds[size_t(xx - first) * 2] = xmin;
    c.bounds[size_t(xx - first) * 2 + 1] = xmax;
  }
  return c;
}

// normalize_coeffs_8bpc()
std::vector<int32_t> fixed_point(const std::vector<double>& k) {
  std::vector<int32_t> out(k.size());
  for (size_t i = 0; i < k.size(); ++i)
    out[i] = k[i] < 0 ? int32_t(-0.5 + k[i] * (1 << kPrecisionBits))
                      : int32_t(0.5 + k[i] * (1 << kPrecisionBits));
  return out;
}

inline uint8_t clip8(int32_t in) {
  if (in >= (1 << kPrecisionBits << 8)) return 255;
  if (in <= 0) return 0;
  return uint8_t(in >> kPrecisionBits);
}

// The horizontal pass with every output pixel using exactly K taps: a pixel with fewer has its window
// moved inside the row and zero weights added. The sums are integers, so they are Pillow's exactly.
// KC > 0 fixes K at compile time (the common tap counts, unrolled); KC = 0 takes it from k.
template <int KC>
void horizontal_rows(const Image& src, const std::vector<int>& start, const std::vector<int32_t>& kk, int k, int w,
                     int row0, int rows, uint8_t* out) {
  const int K = KC > 0 ? KC : k;
  for (int yy = 0; yy < rows; ++yy) {
    const uint8_t* in = &src.rgb[size_t(yy + row0) * src.width * 3];
    uint8_t* o = out + size_t(yy) * w * 3;
    for (int xx = 0; xx < w; ++xx) {
      const uint8_t* p = in + size_t(start[size_t(xx)]) * 3;
      const int32_t* kx = &kk[size_t(xx) * K];
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < K; ++x) {
        s0 += p[3 * x] * kx[x];
        s1 += p[3 * x + 1] * kx[x];
        s2 += p[3 * x + 2] * kx[x];
      }
      o[xx * 3] = clip8(s0);
      o[xx * 3 + 1] = clip8(s1);
      o[xx * 3 + 2] = clip8(s2);
    }
  }
}

// ImagingResampleHorizontal_8bpc for output columns [x0, x0 + w) over source rows [row0, row0 + rows).
Image resample_horizontal(const Image& src, const Coeffs& c, int x0, int w, int row0, int rows) {
  const std::vector<int32_t> fixed = fixed_point(c.k);
  const int K = std::min(c.ksize, src.width);
  std::vector<int> start(static_cast<size_t>(w));
  std::vector<int32_t> kk(size_t(w) * K, 0);
  for (int xx = 0; xx < w; ++xx) {
    const size_t i = size_t(xx + x0 - c.first);
    const int xmin = c.bounds[i * 2], n = c.bounds[i * 2 + 1];
    const int s = std::min(xmin, src.width - K);
    start[size_t(xx)] = s;
    for (int x = 0; x < n; ++x) kk[size_t(xx) * K + (xmin - s) + x] = fixed[i * c.ksize + x];
  }
  Image out;
  out.width = w;
  out.height = rows;
  out.rgb.resize(size_t(w) * rows * 3);
  uint8_t* o = out.rgb.data();
  switch (K) {
    case 5: horizontal_rows<5>(src, start, kk, K, w, row0, rows, o); break;
    case 7: horizontal_rows<7>(src, start, kk, K, w, row0, rows, o); break;
    case 9: horizontal_rows<9>(src, start, kk, K, w, row0, rows, o); break;
    default: horizontal_rows<0>(src, start, kk, K, w, row0, rows, o);
  }
  return out;
}

// ImagingResampleVertical_8bpc for output rows [y0, y0 + h); src row 0 is source row row0. Whole rows
// are accumulated tap by tap (the same sums in the same order as Pillow, laid out to vectorize).
Image resample_vertical(const Image& src, const Coeffs& c, int y0, int h, int row0) {
  const std::vector<int32_t> kk = fixed_point(c.k);
  Image out;
  out.width = src.width;
  out.height = h;
  const size_t stride = size_t(src.width) * 3;
  out.rgb.resize(stride * h);
  std::vector<int32_t> acc(stride);
  for (int yy = 0; yy < h; ++yy) {
    const size_t i = size_t(yy + y0 - c.first);
    const int ymin = c.bounds[i * 2] - row0, ymax = c.bounds[i * 2 + 1];
    const int32_t* k = &kk[i * c.ksize];
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    for (int y = 0; y < ymax; ++y) {
      const uint8_t* row = &src.rgb[size_t(y + ymin) * stride];
      const int32_t ky = k[y];
      for (size_t xx = 0; xx < stride; ++xx) acc[xx] += row[xx] * ky;
    }
    uint8_t* o = &out.rgb[size_t(yy) * stride];
    for (size_t xx = 0; xx < stride; ++xx) o[xx] = clip8(acc[xx]);
  }
  return out;
}

Image resize_nearest(const Image& src, int out_w, int out_h, int x0, int y0, int w, int h) {
  // Pillow resizes with NEAREST through an affine transform sampling at pixel centres.
  const auto centres = [](int n, int offset, int in_size, int out_size) {
    const double scale = double(in_size) / out_size;
    std::vector<int> idx(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) idx[size_t(i)] = std::min(int((i + offset + 0.5) * scale), in_size - 1);
    return idx;
  };
  return pick_pixels(src, centres(w, x0, src.width, out_w), centres(h, y0, src.height, out_h));
}

}  // namespace

Filter filter_from_name(const std::string& name) {
  if (name == "bicubic") return Filter::Bicubic;
  if (name == "bilinear") return Filter::Bilinear;
  if (name == "nearest") return Filter::Nearest;
  if (name == "lanczos") return Filter::Lanczos;
  if (name == "box") return Filter::Box;
  if (name == "hamming") return Filter::Hamming;
  throw Error("unknown interpolation '" + name +
              "' (expected bicubic, bilinear, nearest, lanczos, box or hamming)");
}

const char* filter_name(Filter f) {
  switch (f) {
    case Filter::Nearest: return "nearest";
    case Filter::Box: return "box";
    case Filter::Bilinear: return "bilinear";
    case Filter::Hamming: return "hamming";
    case Filter::Bicubic: return "bicubic";
    case Filter::Lanczos: return "lanczos";
  }
  return "?";
}

Image resize_like_pil(const Image& src, int out_w, int out_h, Filter f) {
  return resize_like_pil_window(src, out_w, out_h, f, 0, 0, out_w, out_h);
}

Image resize_like_pil_window(const Image& src, int out_w, int out_h, Filter f, int x0, int y0, int w, int h) {
  if (out_w == src.width && out_h == src.height) {  // Image.resize returns a copy
    Image out;
    out.width = w;
    out.height = h;
    out.rgb.resize(size_t(w) * h * 3);
    for (int y = 0; y < h; ++y)
      std::copy_n(&src.rgb[(size_t(y + y0) * src.width + x0) * 3], size_t(w) * 3, &out.rgb[size_t(y) * w * 3]);
    return out;
  }
  if (f == Filter::Nearest) return resize_nearest(src, out_w, out_h, x0, y0, w, h);
  // ImagingResampleInner: horizontal pass over just the rows the vertical pass reads, then vertical.
  const bool need_h = out_w != src.width, need_v = out_h != src.height;
  const Coeffs ch = precompute_coeffs(src.width, out_w, f, x0, w);
  const Coeffs cv = precompute_coeffs(src.height, out_h, f, y0, h);
  if (!need_v) return resample_horizontal(src, ch, x0, w, y0, h);
  const int first = cv.bounds[0];
  const int last = cv.bounds[size_t(h - 1) * 2] + cv.bounds[size_t(h - 1) * 2 + 1];
  if (!need_h) {
    Image cols;  // the window's columns of the source rows the vertical pass reads
    cols.width = w;
    cols.height = last - first;
    cols.rgb.resize(size_t(w) * cols.height * 3);
    for (int y = 0; y < cols.height; ++y)
      std::copy_n(&src.rgb[(size_t(y + first) * src.width + x0) * 3], size_t(w) * 3, &cols.rgb[size_t(y) * w * 3]);
    return resample_vertical(cols, cv, y0, h, first);
  }
  // Pillow's horizontal pass runs first, over every source row the vertical pass reads: for a very
  // narrow, very tall image that is enlarged sideways and shrunk downwards (4 x 888888 squashed to
  // 224 x 224), that intermediate is 50 times the image. The order cannot change (each pass rounds to
  // 8 bits, and Pillow's rounding is what is matched), so such shapes are refused.
  const int64_t between = int64_t(w) * (last - first);
  if (between > std::max<int64_t>(16 * int64_t(src.width) * src.height, int64_t(1) << 24))
    throw Error("image of " + std::to_string(src.width) + "x" + std::to_string(src.height) +
                " pixels has too extreme a shape to resize as Pillow does (an intermediate of " +
                std::to_string(between) + " pixels, over 16 times the image's); not preprocessed");
  return resample_vertical(resample_horizontal(src, ch, x0, w, first, last - first), cv, y0, h, first);
}

namespace {

// torch's antialiased interpolation weights along one axis (aten/src/ATen/native/cpu/UpSampleKernel.cpp,
// HelperInterpBase::_compute_weights_aa with scalar_t = float): Pillow's filters and bounds, computed in
// float where torch stores a float and in double where its expression is double.
struct AntialiasTaps {
  int ksize = 0;
  std::vector<int> first, count;  // [out]
  std::vector<float> weight;      // [out, ksize]
};

// HelperInterpLinear::aa_filter and HelperInterpCubic::aa_filter (a = -0.5) as torch's CPU build computes
// them: its kernels are compiled with FMA, and the compiler fuses the cubic's multiply-adds (the weights
// are then bit-identical to torch's; unfused, their cancellations differ by up to 2e-6).
float torch_aa_filter(Filter f, float x) {
  if (x < 0.f) x = -x;
  if (f == Filter::Bilinear) return x < 1.0 ? float(1.0 - x) : 0.f;
  constexpr double a = -0.5;
  if (x < 1.0) return float(std::fma(std::fma(a + 2.0, double(x), -(a + 3.0)) * x, double(x), 1.0));
  if (x < 2.0) return float(double(std::fma(std::fma(x - 5.f, x, 8.f), x, -4.f)) * a);
  return 0.f;
}

AntialiasTaps antialias_taps(int in, int out, Filter f) {
  const int interp_size = f == Filter::Bilinear ? 2 : 4;
  const float scale = float(in) / float(out);  // area_pixel_compute_scale<float>, given a size
  const float support = scale >= 1.0 ? float((interp_size * 0.5) * scale) : float(interp_size * 0.5);
  const float invscale = scale >= 1.0 ? float(1.0 / scale) : 1.f;
  AntialiasTaps t;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out));
  t.count.resize(size_t(out));
  t.weight.assign(size_t(out) * t.ksize, 0.f);
  for (int i = 0; i < out; ++i) {
    const float center = float(scale * (i + 0.5));
    const int xmin = std::max(int(int64_t((center - support) + 0.5)), 0);
    const int xsize = std::min(int(int64_t((center + support) + 0.5)), in) - xmin;
    float* w = &t.weight[size_t(i) * t.ksize];
    float total = 0.f;
    for (int j = 0; j < xsize; ++j) {
      w[j] = torch_aa_filter(f, float((float(j + xmin) - center + 0.5) * invscale));
      total += w[j];
    }
    for (int j = 0; j < xsize; ++j)
      if (total != 0.f) w[j] /= total;
    t.first[size_t(i)] = xmin;
    t.count[size_t(i)] = xsize;
  }
  return t;
}

// One axis of [outer, in, inner] resampled to [outer, out, inner]: each output the sum of its taps in
// order, the first a product, as torch's interpolate_aa_single_dim.
std::vector<float> resample_axis(const std::vector<float>& src, int64_t outer, int in, int64_t inner, int out,
                                 Filter f) {
  const AntialiasTaps t = antialias_taps(in, out, f);
  std::vector<float> dst(size_t(outer * out * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int i = 0; i < out; ++i) {
      const float* w = &t.weight[size_t(i) * t.ksize];
      const float* s = &src[size_t((o * in + t.first[size_t(i)]) * inner)];
      float* d = &dst[size_t((o * out + i) * inner)];
      for (int64_t c = 0; c < inner; ++c) d[c] = s[c] * w[0];
      for (int j = 1; j < t.count[size_t(i)]; ++j)
        for (int64_t c = 0; c < inner; ++c) d[c] += s[j * inner + c] * w[j];
    }
  return dst;
}

}  // namespace

std::vector<float> resample_grid(const float* src, int in_h, int in_w, int C, int out_h, int out_w, Filter f) {
  if (f != Filter::Bilinear && f != Filter::Bicubic)
    throw Error(std::string("torch has no antialiased ") + filter_name(f) + " interpolation (bilinear or bicubic)");
  // torch resamples the width first, then the height (an axis of the same size is left as it is: its
  // weights are 1 and 0).
  std::vector<float> grid(src, src + size_t(in_h) * in_w * C);
  if (out_w != in_w) grid = resample_axis(grid, in_h, in_w, C, out_w, f);
  if (out_h != in_h) grid = resample_axis(grid, 1, in_h, int64_t(out_w) * C, out_h, f);
  return grid;
}

namespace {

// torch's get_cubic_upsample_coefficients (a = -0.75) for each output index along one axis: four source
// indices, clamped to the edge, and their weights.
struct CubicTaps {
  std::vector<int> index;     // [out, 4]
  std::vector<double> weight;  // [out, 4]
};
CubicTaps cubic_taps(int in, int out) {
  constexpr double A = -0.75;
  const auto near = [](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };      // |x| <= 1
  const auto far = [](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  // area_pixel_compute_scale in the input's type (float): in / out, as torch computes it when given a size.
  const float scale = float(in) / float(out);
  CubicTaps t{std::vector<int>(size_t(out) * 4), std::vector<double>(size_t(out) * 4)};
  for (int o = 0; o < out; ++o) {
    const float real = scale * (float(o) + 0.5f) - 0.5f;  // area_pixel_compute_source_index, cubic: unclamped
    const int i0 = int(std::floor(real));
    const double f = double(real) - i0;
    const double w[4] = {far(f + 1), near(f), near(1 - f), far(2 - f)};
    for (int k = 0; k < 4; ++k) {
      t.index[size_t(o) * 4 + k] = std::clamp(i0 - 1 + k, 0, in - 1);
      t.weight[size_t(o) * 4 + k] = w[k];
    }
  }
  return t;
}

}  // namespace

std::vector<float> interpolate_bicubic(const float* src, int in_h, int in_w, int C, int out_h, int out_w) {
  const CubicTaps tx = cubic_taps(in_w, out_w), ty = cubic_taps(in_h, out_h);
  std::vector<float> out(size_t(out_h) * out_w * C);
  std::vector<double> acc(static_cast<size_t>(C));
  for (int y = 0; y < out_h; ++y)
    for (int x = 0; x < out_w; ++x) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int j = 0; j < 4; ++j) {
        const int sy = ty.index[size_t(y) * 4 + j];
        const double wy = ty.weight[size_t(y) * 4 + j];
        for (int i = 0; i < 4; ++i) {
          const double w = wy * tx.weight[size_t(x) * 4 + i];
          const float* s = src + (size_t(sy) * in_w + tx.index[size_t(x) * 4 + i]) * C;
          for (int c = 0; c < C; ++c) acc[size_t(c)] += w * s[c];
        }
      }
      float* o = &out[(size_t(y) * out_w + x) * C];
      for (int c = 0; c < C; ++c) o[c] = float(acc[size_t(c)]);
    }
  return out;
}

}  // namespace vit
