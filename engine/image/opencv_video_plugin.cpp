// libvit_opencv_video.so (opencv_plugin.h): OpenCV's FFmpeg video reader behind a C table, quiet:
// OpenCV's logger is silenced and FFmpeg's messages are collected per video (they say why a file would
// not open or where a stream broke off).
#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

extern "C" {
#include <libavutil/log.h>
}

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>

#include "engine/image/opencv_plugin.h"
#include "engine/image/opencv_plugin_util.h"

namespace {

using vit::cv_plugin::reason_from_opencv;
using vit::cv_plugin::set_error;

struct Video;
std::mutex g_video_mu;      // one video call at a time: FFmpeg's log callback is process-wide
std::mutex g_log_mu;        // FFmpeg logs from its decoding threads too
Video* g_active = nullptr;  // the video whose call is running, under g_log_mu

struct Video {
  cv::VideoCapture cap;
  int64_t next_index = 0;
  double last_time = 0, fps = 0;
  std::string errors, warnings;  // FFmpeg's messages, the first few of each
  std::string problem;           // what video_problem() last returned
  bool frame_damaged = false;
};

// FFmpeg's messages: errors and warnings go to the video being read, the rest nowhere (OpenCV would
// print errors on stderr, one line per damaged packet). A message may come in pieces; lines end in '\n'.
void ffmpeg_log(void*, int level, const char* fmt, va_list args) {
  if (level > AV_LOG_WARNING) return;
  char piece[512];
  std::vsnprintf(piece, sizeof(piece), fmt, args);
  std::lock_guard<std::mutex> lock(g_log_mu);
  if (!g_active) return;
  if (level <= AV_LOG_ERROR) g_active->frame_damaged = true;  // warnings (deprecated formats...) are not damage
  std::string& text = level <= AV_LOG_ERROR ? g_active->errors : g_active->warnings;
  if (text.size() > 300) return;
  for (const char* c = piece; *c; ++c) text += *c == '\n' ? std::string("; ") : std::string(1, *c);
}

// The video whose messages FFmpeg's callback collects while this lives.
struct Listening {
  explicit Listening(Video* v) {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_active = v;
  }
  ~Listening() {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_active = nullptr;
  }
};

std::string tidy(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == ';')) s.pop_back();
  return s;
}


void* video_open(const char* path, char* err, size_t err_size) {
  std::lock_guard<std::mutex> lock(g_video_mu);
  auto* v = new Video;
  bool opened = false;
  {
    Listening listen(v);
    try {
      opened = v->cap.open(path, cv::CAP_FFMPEG);
    } catch (const cv::Exception& e) {
      v->errors = reason_from_opencv(e.what());
    }
  }
  if (!opened) {
    const std::string problem = tidy(v->errors.empty() ? v->warnings : v->errors);
    set_error(err, err_size, "cannot open as a video" + (problem.empty() ? std::string(" (FFmpeg found no stream it can decode)")
                                                                         : ": " + problem));
    delete v;
    return nullptr;
  }
  v->fps = v->cap.get(cv::CAP_PROP_FPS);
  v->errors.clear();
  v->warnings.clear();
  return v;
}

int video_grab(void* handle, VitCvFrame* frame) {
  std::lock_guard<std::mutex> lock(g_video_mu);
  auto* v = static_cast<Video*>(handle);
  bool ok = false;
  {
    Listening listen(v);
    v->frame_damaged = false;
    try {
      ok = v->cap.grab();
    } catch (const cv::Exception& e) {
      std::lock_guard<std::mutex> log_lock(g_log_mu);
      v->errors += reason_from_opencv(e.what()) + "; ";
    }
  }
  if (!ok) return 0;
  // POS_MSEC after a grab is that frame's time; FFmpeg leaves it at 0 for the frames an H.264 decoder
  // hands back when flushed at the end, which then follow their predecessor by one frame period.
  double t = v->cap.get(cv::CAP_PROP_POS_MSEC) / 1000.0;
  if (v->next_index > 0 && !(t > v->last_time)) t = v->last_time + (v->fps > 0 ? 1.0 / v->fps : 0.0);
  frame->index = v->next_index++;
  frame->time_s = v->last_time = t;
  return 1;
}

int video_retrieve(void* handle, VitCvAlloc alloc, void* ctx, char* err, size_t err_size) {
  std::lock_guard<std::mutex> lock(g_video_mu);
  auto* v = static_cast<Video*>(handle);
  cv::Mat bgr;
  try {
    Listening listen(v);
    if (!v->cap.retrieve(bgr) || bgr.empty()) {
      set_error(err, err_size, "FFmpeg returned no pixels for frame " + std::to_string(v->next_index - 1));
      return 0;
    }
    if (bgr.type() != CV_8UC3) cv::cvtColor(bgr, bgr, bgr.channels() == 1 ? cv::COLOR_GRAY2BGR : cv::COLOR_BGRA2BGR);
  } catch (const cv::Exception& e) {
    set_error(err, err_size, reason_from_opencv(e.what()));
    return 0;
  }
  uint8_t* dst = alloc(ctx, bgr.cols, bgr.rows);
  if (!dst) {
    set_error(err, err_size, "out of memory for a frame of " + std::to_string(bgr.cols) + "x" + std::to_string(bgr.rows));
    return 0;
  }
  cv::Mat rgb(bgr.rows, bgr.cols, CV_8UC3, dst);
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return 1;
}

const char* video_problem(void* handle) {
  auto* v = static_cast<Video*>(handle);
  std::lock_guard<std::mutex> lock(g_log_mu);
  v->problem = tidy(v->errors + v->warnings);
  return v->problem.c_str();
}

int video_frame_damaged(void* handle) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  return static_cast<Video*>(handle)->frame_damaged ? 1 : 0;
}

int64_t video_announced_frames(void* handle) {
  std::lock_guard<std::mutex> lock(g_video_mu);
  const double n = static_cast<Video*>(handle)->cap.get(cv::CAP_PROP_FRAME_COUNT);
  return n > 0 ? int64_t(n) : 0;
}

void video_close(void* handle) {
  std::lock_guard<std::mutex> lock(g_video_mu);
  delete static_cast<Video*>(handle);
}

}  // namespace

extern "C" const VitCvVideoApi* vit_opencv_video_api(void) {
  static const VitCvVideoApi api = [] {
    cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
    av_log_set_callback(ffmpeg_log);
    return VitCvVideoApi{VIT_OPENCV_ABI, video_open, video_grab, video_retrieve, video_problem,
                         video_frame_damaged, video_announced_frames, video_close};
  }();
  return &api;
}
