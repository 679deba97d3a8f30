// Loading OpenCV's plugins on first use and the engine's side of their calls; see opencv_io.h.
#include "engine/image/opencv_io.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "engine/io/files.h"
#include "engine/image/opencv_plugin.h"
#include "vit/error.h"

// Defined (cmake/vit_package.cpp) in a program built against an installed package: the folder of that
// package's plugins, as found when the program was configured. Absent in our own binaries.
extern "C" __attribute__((weak)) const char vit_package_plugin_dir[];

namespace vit {

// Where a plugin may be: VIT_OPENCV_PLUGIN_DIR names the folder outright; else the installed package's
// folder (the engine is a static library, so the program linking it says where the package is), beside
// the binary holding this code (the vit program, the Python module), where `cmake --install` put them
// when the prefix was known at configure time, and where this build put them.
std::vector<std::string> plugin_dirs() {
  if (const char* p = std::getenv("VIT_OPENCV_PLUGIN_DIR"); p && *p) return {p};
  std::vector<std::string> out;
  if (vit_package_plugin_dir) out.push_back(vit_package_plugin_dir);
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&plugin_dirs), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    if (self.find('/') == std::string::npos) {  // the main program, named as it was started
      char exe[4096];
      const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
      self = n > 0 ? std::string(exe, size_t(n)) : "";
    }
    if (!self.empty()) out.push_back(self.substr(0, self.find_last_of('/')));
  }
  out.push_back(VIT_OPENCV_PLUGIN_INSTALL_DIR);
  out.push_back(VIT_OPENCV_PLUGIN_BUILD_DIR);
  return out;
}

namespace {

std::string joined(const std::vector<std::string>& dirs) {
  std::string out;
  for (const std::string& d : dirs) out += (out.empty() ? "" : ", ") + d;
  return out;
}

// OpenCV reads OPENCV_IO_MAX_IMAGE_PIXELS once, when imgcodecs is loaded (by either plugin: videoio
// links it): set from the first caller's limit, before the first dlopen. setenv() races with getenv() on
// other threads (glibc), so a program embedding the library should meet its first WebP, TIFF, JPEG 2000 or
// video before starting threads that read the environment.
void set_pixel_limit_once(int64_t max_pixels) {
  static std::once_flag once;
  std::call_once(once, [&] { ::setenv("OPENCV_IO_MAX_IMAGE_PIXELS", std::to_string(max_pixels).c_str(), 1); });
}

// One plugin's table, loaded once per process; T is VitCvImageApi or VitCvVideoApi.
template <typename T>
const T& plugin(const char* file, const char* symbol, const std::string& name, const char* what, int64_t max_pixels) {
  static std::once_flag once;
  static const T* api = nullptr;
  static std::string failure;
  std::call_once(once, [&] {
    set_pixel_limit_once(max_pixels);
    for (const std::string& dir : plugin_dirs()) {
      const std::string path = dir + "/" + file;
      if (::access(path.c_str(), F_OK) != 0) continue;
      void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        failure = ::dlerror();
        continue;
      }
      using Entry = const T* (*)();
      const auto entry = reinterpret_cast<Entry>(::dlsym(h, symbol));
      const T* table = entry ? entry() : nullptr;
      if (!table || table->abi != VIT_OPENCV_ABI) {
        failure = path + " is not this build's plugin (rebuild it)";
        continue;
      }
      api = table;
      return;
    }
  });
  if (!api)
    throw Error(name, std::string("reading ") + what + " needs OpenCV's plugin " + file + ", which " +
                          (failure.empty() ? "is not installed (looked in " + joined(plugin_dirs()) +
                                                 "; VIT_OPENCV_PLUGIN_DIR names the folder)"
                                           : "could not be loaded: " + failure));
  return *api;
}

const VitCvImageApi& image_plugin(const std::string& name, const char* what, int64_t max_pixels) {
  return plugin<VitCvImageApi>("libvit_opencv_image.so", "vit_opencv_image_api", name, what, max_pixels);
}

const VitCvVideoApi& video_plugin(const std::string& name, int64_t max_pixels) {
  return plugin<VitCvVideoApi>("libvit_opencv_video.so", "vit_opencv_video_api", name, "videos", max_pixels);
}

// The callback that hands the plugin an Image's storage, refusing sizes over the limit before allocating.
struct Sink {
  Image* image;
  int64_t max_pixels;
  bool over_limit = false;
};

uint8_t* allocate(void* ctx, int width, int height) {
  auto* s = static_cast<Sink*>(ctx);
  if (width <= 0 || height <= 0 || int64_t(width) * height > s->max_pixels) {
    s->over_limit = true;
    s->image->width = width;
    s->image->height = height;
    return nullptr;
  }
  try {
    s->image->rgb.resize(size_t(width) * size_t(height) * 3);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  s->image->width = width;
  s->image->height = height;
  return s->image->rgb.data();
}

}  // namespace

const char* opencv_image_format(ImageFormat format) {
  switch (format) {
    case ImageFormat::WebP: return "WebP";
    case ImageFormat::Tiff: return "TIFF";
    case ImageFormat::Jpeg2000: return "JPEG 2000";
    default: return nullptr;
  }
}

Image decode_with_opencv(const uint8_t* data, size_t size, ImageFormat image_format, const std::string& name,
                         int64_t max_pixels) {
  const char* format = opencv_image_format(image_format);
  if (!format) throw Error(name, "not an image OpenCV decodes here (WebP, TIFF, JPEG 2000)");
  const VitCvImageApi& api = image_plugin(name, format, max_pixels);
  Image img;
  Sink sink{&img, max_pixels};
  char err[512] = "";
  const int status = api.decode(data, size, allocate, &sink, err, sizeof(err));
  if (status == -1)
    throw Error(name, "image is over the limit of " + std::to_string(max_pixels) +
                          " pixels (--max-pixels; OpenCV refused it from its header); not decoded");
  if (sink.over_limit) throw Error(name, "image of " + over_pixel_limit(img.width, img.height, max_pixels));
  if (status != 1) throw Error(name, std::string("cannot decode ") + format + ": " + err);
  return img;
}

namespace {

// Whether a file opens as a container of the video extensions (find_images' list): MP4 and MOV's ISO
// boxes, Matroska and WebM's EBML header, AVI's RIFF. A file that FFmpeg cannot open and that is none of
// these is no video at all, and is called so rather than by FFmpeg's complaint about it.
bool video_container(const uint8_t* d, size_t n) {
  if (n >= 8)
    for (const char* box : {"ftyp", "moov", "mdat", "free", "skip", "wide", "pnot", "uuid"})
      if (std::memcmp(d + 4, box, 4) == 0) return true;
  if (n >= 4 && std::memcmp(d, "\x1a\x45\xdf\xa3", 4) == 0) return true;
  return n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "AVI ", 4) == 0;
}

}  // namespace

VideoReader::VideoReader(const std::string& path, int64_t max_pixels)
    : path_(path), max_pixels_(max_pixels), api_(&video_plugin(path, max_pixels)) {
  const InputFile regular(path);  // FFmpeg would block on a FIFO and read a device: regular files only
  if (regular.size() == 0) throw Error(path, "empty file, not a video");
  char err[512] = "";
  video_ = api_->open(path.c_str(), err, sizeof(err));
  if (video_) return;
  uint8_t head[12];
  const size_t n = size_t(std::min<uint64_t>(regular.size(), sizeof(head)));
  regular.read_at(0, head, n, "its first bytes");
  if (!video_container(head, n)) throw Error(path, "cannot open as a video: not a video file (MP4, MKV, AVI, MOV, WebM)");
  throw Error(path, err);
}

VideoReader::~VideoReader() {
  if (video_) api_->close(video_);
}

bool VideoReader::grab(Frame* frame) {
  VitCvFrame f{};
  if (!api_->grab(video_, &f)) return false;
  frame->index = f.index;
  frame->time_s = f.time_s;
  return true;
}

Image VideoReader::retrieve() {
  Image img;
  Sink sink{&img, max_pixels_};
  char err[512] = "";
  const int ok = api_->retrieve(video_, allocate, &sink, err, sizeof(err));
  if (sink.over_limit) throw Error(path_, "frame of " + over_pixel_limit(img.width, img.height, max_pixels_));
  if (!ok) throw Error(path_, err);
  return img;
}

bool VideoReader::frame_damaged() const { return api_->frame_damaged(video_) != 0; }

std::string VideoReader::problem() const { return api_->problem(video_); }

int64_t VideoReader::announced_frames() const { return api_->announced_frames(video_); }

}  // namespace vit
