// Separable resampling exactly as Pillow computes it (Resample.c): antialiased filters whose support
// grows with the downscale factor, fixed-point weights with 22 fractional bits, and uint8 rounding and
// clamping after the horizontal pass and after the vertical pass. A float variant resamples position
// tables the way torch's interpolate with antialias=True does (Pillow's filters, torch's float arithmetic).
#pragma once
#include <string>
#include <vector>

#include "engine/image/image.h"

namespace vit {

enum class Filter { Nearest, Box, Bilinear, Hamming, Bicubic, Lanczos };

Filter filter_from_name(const std::string& name);  // "bicubic", "bilinear", ...; throws on others
const char* filter_name(Filter f);

// PIL Image.resize(size, filter) on an RGB image.
Image resize_like_pil(const Image& src, int out_w, int out_h, Filter f);
// The [x0, x0 + w) x [y0, y0 + h) window of that resized image, computed alone (same pixels): what a
// center crop keeps, without resampling the rest.
Image resize_like_pil_window(const Image& src, int out_w, int out_h, Filter f, int x0, int y0, int w, int h);

// torch's F.interpolate(mode, size=(out_h, out_w), align_corners=False, antialias=True) of a [in_h, in_w, C]
// channels-last grid to [out_h, out_w, C], for f = Bilinear or Bicubic (torch has no other antialiased
// mode; an Error otherwise): torch's weights in float, bit for bit, the width resampled first, then the height.
std::vector<float> resample_grid(const float* src, int in_h, int in_w, int C, int out_h, int out_w,
                                 Filter f);

// The same as torch's F.interpolate(mode="bicubic", size=(out_h, out_w), align_corners=False) without
// antialiasing: 4 x 4 taps of the cubic convolution with a = -0.75 at src = (dst + 0.5) * in / out - 0.5,
// indices clamped to the edge, whatever the scale (so a downscale is not low-passed).
std::vector<float> interpolate_bicubic(const float* src, int in_h, int in_w, int C, int out_h, int out_w);

}  // namespace vit
