// libvit_opencv_image.so (opencv_plugin.h): OpenCV's WebP, TIFF and JPEG 2000 readers behind a C table,
// quiet: OpenCV's logger is silenced, and the text imdecode writes straight to std::cerr becomes the
// error's reason.
#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <climits>
#include <iostream>
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

int decode(const uint8_t* data, size_t size, VitCvAlloc alloc, void* ctx, char* err, size_t err_size) {
  if (size == 0 || size > size_t(INT_MAX)) {  // imdecode throws on an empty buffer; a Mat row holds INT_MAX
    set_error(err, err_size, "file of " + std::to_string(size) + " bytes cannot be handed to OpenCV");
    return 0;
  }
  std::string captured;
  t_cerr_capture = &captured;
  cv::Mat bgr;
  std::string why;
  int status = 0;
  try {
    const cv::Mat buf(1, int(size), CV_8UC1, const_cast<uint8_t*>(data));
    bgr = cv::imdecode(buf, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& e) {
    // OPENCV_IO_MAX_IMAGE_PIXELS: refused from the header, before any pixel is allocated.
    status = e.err.find("CV_IO_MAX_IMAGE_PIXELS") != std::string::npos ? -1 : 0;
    why = reason_from_opencv(e.what());
  } catch (const std::exception& e) {
    why = e.what();
  }
  t_cerr_capture = nullptr;
  if (bgr.empty()) {
    if (why.empty()) why = captured.empty() ? "OpenCV's decoder could not read it (damaged or truncated)"
                                            : reason_from_opencv(captured);
    set_error(err, err_size, why);
    return status;
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
