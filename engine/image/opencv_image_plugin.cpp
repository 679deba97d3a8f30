// libvit_opencv_image.so (opencv_plugin.h): OpenCV's WebP, TIFF and JPEG 2000 readers behind a C table,
// quiet: OpenCV's logger is silenced, and the text imdecode writes straight to std::cerr becomes the
// error's reason. Where OpenCV's pixels are not PIL's, PIL's are made here: an animated WebP's first
// frame (libwebp's animation decoder, which PIL uses), 16-bit samples' high byte, float TIFF's clipping.
#include <webp/decode.h>
#include <webp/demux.h>

#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <climits>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "engine/image/opencv_plugin.h"
#include "engine/image/opencv_plugin_util.h"

namespace {

using vit::cv_plugin::reason_from_opencv;
using vit::cv_plugin::set_error;

// std::cerr for the whole process: text written by a thread that is inside decode() goes to that
// decode's reason, anything else passes through. Unbuffered, so threads share no state here.
thread_local std::string* t_cerr_capture = nullptr;

class CerrSplitter : public std::streambuf {
 public:
  explicit CerrSplitter(std::streambuf* original) : original_(original) {}

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    const char ch = char(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (t_cerr_capture) {
      t_cerr_capture->append(s, size_t(n));
      return n;
    }
    return original_->sputn(s, n);
  }
  int sync() override { return original_->pubsync(); }

 private:
  std::streambuf* original_;
};

// An animated WebP: its first frame, as PIL reads it (libwebp's WebPAnimDecoder, RGBA on a transparent
// canvas, the alpha then dropped). OpenCV's WebP reader takes still images only. The canvas size is
// checked (alloc) before the decoder allocates it.
int decode_animated_webp(const uint8_t* data, size_t size, int width, int height, VitCvAlloc alloc, void* ctx,
                         char* err, size_t err_size) {
  uint8_t* dst = alloc(ctx, width, height);
  if (!dst) {
    set_error(err, err_size, "out of memory for " + std::to_string(width) + "x" + std::to_string(height) + " pixels");
    return 0;
  }
  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options)) {
    set_error(err, err_size, "libwebp's animation decoder is not the version this plugin was built with");
    return 0;
  }
  options.color_mode = MODE_RGBA;
  const WebPData webp{data, size};
  const std::unique_ptr<WebPAnimDecoder, void (*)(WebPAnimDecoder*)> dec(WebPAnimDecoderNew(&webp, &options),
                                                                          WebPAnimDecoderDelete);
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  if (!dec || !WebPAnimDecoderGetNext(dec.get(), &rgba, &timestamp)) {
    set_error(err, err_size, "animated WebP: libwebp could not decode its first frame (damaged or truncated)");
    return 0;
  }
  for (size_t i = 0, n = size_t(width) * size_t(height); i < n; ++i) std::memcpy(dst + 3 * i, rgba + 4 * i, 3);
  return 1;
}

// PIL's mode F (one channel of 32-bit floats) as RGB: convert('RGB') goes through mode L, which clips to
// 0..255 and truncates (Pillow's f2l). NaN, which that cast leaves undefined, becomes 0.
uint8_t pil_f2l(double v) { return v >= 255.0 ? 255 : v > 0.0 ? uint8_t(v) : 0; }

// A TIFF that OpenCV's colour read refused, read again as stored: floating-point samples become PIL's
// pixels (one channel) or a refusal saying what the file holds. Returns an empty Mat, *why set, otherwise.
cv::Mat float_tiff_as_bgr(const cv::Mat& buf, std::string* why) {
  cv::Mat raw;
  try {
    raw = cv::imdecode(buf, cv::IMREAD_UNCHANGED);  // as stored: no EXIF orientation either
  } catch (const cv::Exception&) {
    return {};
  }
  if (raw.empty() || (raw.depth() != CV_32F && raw.depth() != CV_64F)) return {};
  if (raw.channels() != 1) {
    *why = "TIFF of " + std::to_string(raw.channels()) + " channels of " + (raw.depth() == CV_32F ? "32" : "64") +
           "-bit floating-point samples: not supported (PIL reads floating-point TIFF only as one channel, mode F)";
    return {};
  }
  cv::Mat gray(raw.rows, raw.cols, CV_8UC1);
  for (int y = 0; y < raw.rows; ++y)
    for (int x = 0; x < raw.cols; ++x)
      gray.at<uint8_t>(y, x) = pil_f2l(raw.depth() == CV_32F ? double(raw.at<float>(y, x)) : raw.at<double>(y, x));
  cv::Mat bgr;
  cv::cvtColor(gray, bgr, cv::COLOR_GRAY2BGR);
  return bgr;
}

int decode(const uint8_t* data, size_t size, VitCvAlloc alloc, void* ctx, char* err, size_t err_size) {
  if (size == 0 || size > size_t(INT_MAX)) {  // imdecode throws on an empty buffer; a Mat row holds INT_MAX
    set_error(err, err_size, "file of " + std::to_string(size) + " bytes cannot be handed to OpenCV");
    return 0;
  }
  WebPBitstreamFeatures webp{};
  if (WebPGetFeatures(data, size, &webp) == VP8_STATUS_OK && webp.has_animation)
    return decode_animated_webp(data, size, webp.width, webp.height, alloc, ctx, err, err_size);
  std::string captured;
  t_cerr_capture = &captured;
  cv::Mat bgr;
  std::string why;
  int status = 0;
  const cv::Mat buf(1, int(size), CV_8UC1, const_cast<uint8_t*>(data));
  try {
    // Any depth: OpenCV would round 16-bit samples to 8 bits, where PIL takes their high byte.
    bgr = cv::imdecode(buf, cv::IMREAD_COLOR | cv::IMREAD_ANYDEPTH | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& e) {
    // OPENCV_IO_MAX_IMAGE_PIXELS: refused from the header, before any pixel is allocated.
    status = e.err.find("CV_IO_MAX_IMAGE_PIXELS") != std::string::npos ? -1 : 0;
    why = reason_from_opencv(e.what());
  } catch (const std::exception& e) {
    why = e.what();
  }
  // Floating-point TIFF: one channel fails OpenCV's colour read (an assertion), more come as floats. Read
  // it again as stored.
  std::string float_why;
  const bool tiff = size >= 4 && (!std::memcmp(data, "II*", 4) || !std::memcmp(data, "MM\0*", 4));
  if (tiff && status == 0 && (bgr.empty() || bgr.depth() == CV_32F || bgr.depth() == CV_64F))
    bgr = float_tiff_as_bgr(buf, &float_why);
  t_cerr_capture = nullptr;
  if (bgr.empty()) {
    if (!float_why.empty()) why = float_why;
    if (why.empty()) why = captured.empty() ? "OpenCV's decoder could not read it (damaged or truncated)"
                                            : reason_from_opencv(captured);
    set_error(err, err_size, why);
    return status;
  }
  if (bgr.depth() == CV_16U) {  // PIL's high byte (OpenCV's convertTo would round v / 256)
    cv::Mat high(bgr.rows, bgr.cols, CV_8UC3);
    for (int y = 0; y < bgr.rows; ++y) {
      const uint16_t* in = bgr.ptr<uint16_t>(y);
      uint8_t* out = high.ptr<uint8_t>(y);
      for (int i = 0; i < bgr.cols * 3; ++i) out[i] = uint8_t(in[i] >> 8);
    }
    bgr = high;
  } else if (bgr.depth() != CV_8U) {
    set_error(err, err_size, "image of samples OpenCV gives as " + cv::typeToString(bgr.type()) + ": not supported");
    return 0;
  }
  uint8_t* dst = alloc(ctx, bgr.cols, bgr.rows);
  if (!dst) {
    set_error(err, err_size, "out of memory for " + std::to_string(bgr.cols) + "x" + std::to_string(bgr.rows) + " pixels");
    return 0;
  }
  cv::Mat rgb(bgr.rows, bgr.cols, CV_8UC3, dst);
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return 1;
}

}  // namespace

extern "C" const VitCvImageApi* vit_opencv_image_api(void) {
  static const VitCvImageApi api = [] {
    cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
    // Never destroyed: std::cerr may be flushed after this library's static objects are gone.
    std::cerr.rdbuf(new CerrSplitter(std::cerr.rdbuf()));
    return VitCvImageApi{VIT_OPENCV_ABI, decode};
  }();
  return &api;
}
