// Drawing attention pictures; see picture.h. Works in RGB throughout (OpenCV's colour maps come out BGR
// and are turned round once). stb_image_write's implementation lives here, static, so that it cannot
// clash with another copy in a program that links the engine.
#include "engine/explain/picture.h"

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "vit/error.h"

// stb_image_write's own deflate is several times slower than zlib's: PNGs are compressed by zlib.
static unsigned char* zlib_compress(unsigned char* data, int size, int* out_size, int quality);
#define STBIW_ZLIB_COMPRESS zlib_compress
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#include <zlib.h>

// stb frees the result with STBIW_FREE (free); level 1, the fastest, as pictures of photos barely shrink.
static unsigned char* zlib_compress(unsigned char* data, int size, int* out_size, int /*quality*/) {
  uLongf n = compressBound(uLong(size));
  auto* out = static_cast<unsigned char*>(std::malloc(n));
  if (!out || compress2(out, &n, data, uLong(size), 1) != Z_OK) {
    std::free(out);
    return nullptr;
  }
  *out_size = int(n);
  return out;
}

namespace vit {
namespace {

constexpr int kReadableSide = 448;  // smaller photos are enlarged to this (longer side), so text stays legible
// The colour map is blended over the photo by its own value: where attention is lowest the photo shows (greyed
// and dimmed to kBase), where it is highest the map's colour all but covers it, so the places the model looked
// at stand out on any photo.
constexpr double kHeatLow = 0.15, kHeatHigh = 0.9;  // the map's weight at the lowest and the highest attention
constexpr double kBase = 0.6;                       // brightness of the photo under the map
constexpr double kDim = 0.3;          // brightness left to the part of the photo the model did not see
// The smallest picture drawn (within max_side): room for a readable caption whatever the photo's
// proportions. A 10000x50 photo at 1024 pixels is 5 pixels high; it is centred on a black canvas.
constexpr int kMinWidth = 320, kMinHeight = 96;

cv::Mat as_mat(const Image& img) {
  return cv::Mat(img.height, img.width, CV_8UC3, const_cast<uint8_t*>(img.rgb.data()));
}

Image to_image(const cv::Mat& m) {
  const cv::Mat c = m.isContinuous() ? m : m.clone();
  Image out;
  out.width = c.cols;
  out.height = c.rows;
  out.rgb.assign(c.data, c.data + c.total() * 3);
  return out;
}

// OpenCV's own thread pool is not wanted: pictures are small, and the cores belong to OpenMP.
void single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { cv::setNumThreads(0); });
}

cv::Mat scaled(const cv::Mat& rgb, double s) {
  const cv::Size size(std::max(1, int(std::lround(rgb.cols * s))), std::max(1, int(std::lround(rgb.rows * s))));
  cv::Mat out;
  cv::resize(rgb, out, size, 0, 0, s < 1 ? cv::INTER_AREA : cv::INTER_CUBIC);
  return out;
}

// The map over `photo` (w x h, RGB) in inferno colours: stretched from its minimum to its maximum, upsampled
// bicubically (cell centres on the patch centres) and clamped, since bicubic overshoots [0, 1]; each pixel's
// colour weighted by its value u, kHeatLow + (kHeatHigh - kHeatLow) u^2 (the middling values mostly photo), over
// the photo greyed by half and dimmed to kBase.
cv::Mat heat_over(const cv::Mat& photo, const Heat& heat) {
  const int w = photo.cols, h = photo.rows;
  const cv::Mat m(heat.rows, heat.cols, CV_32F, const_cast<float*>(heat.values));
  double lo = 0, hi = 0;
  cv::minMaxLoc(m, &lo, &hi);
  cv::Mat unit, up, u8, bgr, colours;
  const double range = hi - lo;
  m.convertTo(unit, CV_32F, range > 0 ? 1 / range : 0, range > 0 ? -lo / range : 0);
  cv::resize(unit, up, cv::Size(w, h), 0, 0, cv::INTER_CUBIC);
  up.convertTo(u8, CV_8U, 255.0);  // saturating: the clamp
  cv::applyColorMap(u8, bgr, cv::COLORMAP_INFERNO);
  cv::cvtColor(bgr, colours, cv::COLOR_BGR2RGB);
  cv::Mat grey, grey3, base;
  cv::cvtColor(photo, grey, cv::COLOR_RGB2GRAY);
  cv::cvtColor(grey, grey3, cv::COLOR_GRAY2RGB);
  cv::addWeighted(photo, 0.5 * kBase, grey3, 0.5 * kBase, 0, base);
  cv::Mat out(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y) {
    const uint8_t* a = u8.ptr<uint8_t>(y);
    const cv::Vec3b* b = base.ptr<cv::Vec3b>(y);
    const cv::Vec3b* c = colours.ptr<cv::Vec3b>(y);
    cv::Vec3b* o = out.ptr<cv::Vec3b>(y);
    for (int x = 0; x < w; ++x) {
      const double u = a[x] / 255.0, t = kHeatLow + (kHeatHigh - kHeatLow) * u * u;
      for (int k = 0; k < 3; ++k) o[x][k] = cv::saturate_cast<uint8_t>((1 - t) * b[x][k] + t * c[x][k]);
    }
  }
  return out;
}

// The window in the pixels of the photo scaled by s.
cv::Rect scaled_window(const Rect& w, double s) {
  const int x0 = int(std::lround(w.x * s)), y0 = int(std::lround(w.y * s));
  const int x1 = int(std::lround((w.x + w.w) * s)), y1 = int(std::lround((w.y + w.h) * s));
  return cv::Rect(x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0));
}

// Hershey fonts draw ASCII only.
std::string ascii(const std::string& text) {
  std::string out;
  for (const char c : text) out += c >= 32 && c < 127 ? c : '?';
  return out;
}

// White text on a dark band along the bottom, shrunk to fit the width; sized by the width, or for a
// picture more than twice as wide as tall (a panorama) by twice its height, so the band leaves most of it.
void put_caption(cv::Mat& img, const std::string& text) {
  const std::string t = ascii(text);
  const int font = cv::FONT_HERSHEY_SIMPLEX;
  double scale = std::max(0.45, std::min(img.cols, 2 * img.rows) / 800.0);
  const int thickness = std::max(1, int(std::lround(scale * 1.6)));
  int base = 0;
  cv::Size size = cv::getTextSize(t, font, scale, thickness, &base);
  const int pad = std::max(3, size.height / 2);
  if (size.width > img.cols - 2 * pad && size.width > 0) {
    scale *= double(std::max(1, img.cols - 2 * pad)) / size.width;
    size = cv::getTextSize(t, font, scale, thickness, &base);
  }
  const int band_h = std::min(img.rows, size.height + base + 2 * pad);
  cv::Mat band = img(cv::Rect(0, img.rows - band_h, img.cols, band_h));
  band.convertTo(band, -1, 0.3);
  cv::putText(img, t, cv::Point(pad, img.rows - pad - base), font, scale, cv::Scalar(255, 255, 255), thickness,
              cv::LINE_AA);
}

void append_bytes(void* ctx, void* data, int size) {
  static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size_t(size));
}

}  // namespace

Rect input_window(int w, int h, const PreprocessConfig& cfg) {
  const CropGeometry g = crop_geometry(w, h, cfg);
  const double sx = double(w) / g.resized_w, sy = double(h) / g.resized_h;
  return {g.left * sx, g.top * sy, cfg.width * sx, cfg.height * sy};
}

Image draw_attention(const Image& photo, const Rect& window, const Heat& heat, const std::string& caption,
                     int max_side) {
  single_threaded();
  const int longer = std::max(photo.width, photo.height);
  const int side = longer > max_side ? max_side : std::min(max_side, std::max(longer, kReadableSide));
  const double s = double(side) / longer;
  const cv::Mat canvas = scaled(as_mat(photo), s);
  cv::Mat out;
  canvas.convertTo(out, -1, kDim);
  const cv::Rect win = scaled_window(window, s);
  const cv::Rect inside = win & cv::Rect(0, 0, canvas.cols, canvas.rows);
  if (!inside.empty()) {  // the window's pixels; black where it reaches past the photo (as the crop pads)
    cv::Mat view(win.height, win.width, CV_8UC3, cv::Scalar::all(0));
    canvas(inside).copyTo(view(inside - win.tl()));
    heat_over(view, heat)(inside - win.tl()).copyTo(out(inside));
  }
  const int min_w = std::min(kMinWidth, max_side), min_h = std::min(kMinHeight, max_side);
  if (out.cols < min_w || out.rows < min_h) {
    cv::Mat padded(std::max(out.rows, min_h), std::max(out.cols, min_w), CV_8UC3, cv::Scalar::all(0));
    out.copyTo(padded(cv::Rect((padded.cols - out.cols) / 2, (padded.rows - out.rows) / 2, out.cols, out.rows)));
    out = padded;
  }
  put_caption(out, caption);
  return to_image(out);
}

Image draw_panels(const Image& photo, const Rect& window, const std::vector<Heat>& heats,
                  const std::vector<std::string>& captions, int max_side) {
  single_threaded();
  const int n = int(heats.size()), gap = 4;
  const int cols = int(std::ceil(std::sqrt(double(n)))), rows = (n + cols - 1) / cols;
  // Panels of at most 256 pixels a side, fewer when the grid would pass max_side; the window's shape.
  const int side = std::max(16, std::min({256, (max_side - (cols + 1) * gap) / cols, (max_side - (rows + 1) * gap) / rows}));
  const double aspect = window.w / window.h;
  const int pw = aspect >= 1 ? side : std::max(1, int(std::lround(side * aspect)));
  const int ph = aspect >= 1 ? std::max(1, int(std::lround(side / aspect))) : side;
  const double s = pw / window.w;
  // The window's pixels at panel size, black where it reaches past the photo (as the crop pads).
  const cv::Mat photo_s = scaled(as_mat(photo), s);
  const cv::Rect win = scaled_window(window, s);
  cv::Mat view(ph, pw, CV_8UC3, cv::Scalar(0, 0, 0));
  const cv::Rect inside = win & cv::Rect(0, 0, photo_s.cols, photo_s.rows);
  const cv::Rect in_view = (inside - win.tl()) & cv::Rect(0, 0, pw, ph);
  if (!in_view.empty()) photo_s(in_view + win.tl()).copyTo(view(in_view));

  cv::Mat grid(rows * ph + (rows + 1) * gap, cols * pw + (cols + 1) * gap, CV_8UC3, cv::Scalar(32, 32, 32));
  for (int i = 0; i < n; ++i) {
    cv::Mat panel = heat_over(view, heats[size_t(i)]);
    put_caption(panel, captions[size_t(i)]);
    panel.copyTo(grid(cv::Rect(gap + (i % cols) * (pw + gap), gap + (i / cols) * (ph + gap), pw, ph)));
  }
  return to_image(grid);
}

namespace {

// A PNG tEXt chunk: length, type, keyword NUL text, CRC of type and data (big-endian numbers).
std::string text_chunk(const std::string& keyword, const std::string& text) {
  const std::string body = "tEXt" + keyword + std::string(1, '\0') + text;
  const auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)};
  };
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()));
  return be32(uint32_t(body.size() - 4)) + body + be32(uint32_t(crc));
}

}  // namespace

std::string encode_png(const Image& img, const std::string& software) {
  // One row filter (Paeth) rather than stb's trial of all five for every row.
  static std::once_flag once;
  std::call_once(once, [] { stbi_write_force_png_filter = 4; });
  std::string bytes;
  if (!stbi_write_png_to_func(append_bytes, &bytes, img.width, img.height, 3, img.rgb.data(), img.width * 3))
    throw Error("cannot encode a PNG of " + std::to_string(img.width) + "x" + std::to_string(img.height));
  constexpr size_t kHeaderEnd = 8 + 25;  // the signature and the IHDR chunk
  if (!software.empty()) bytes.insert(kHeaderEnd, text_chunk("Software", software));
  return bytes;
}

}  // namespace vit
