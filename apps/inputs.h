// The inputs of the commands that read images: PATH arguments, folders walked for image files, and
// a progress bar for long runs.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "vit/vit.h"

namespace vit::app {

using Input = ImagePath;  // a file, or the error known before it is read

// PATH arguments in order; a folder contributes its image files (vit::find_images). A PATH that does
// not exist sets *missing and is an input with its error.
std::vector<Input> collect_inputs(const std::vector<std::string>& paths, bool* missing);

// Paths from a stream (one per line, or NUL-separated as find -print0 writes), handed out as soon as
// they arrive: next() returns up to `max` of them, fewer when no more input is ready yet, so a pipeline
// (find | vit classify --stdin, xargs, Spark's RDD.pipe) sees each batch's results without waiting for
// the stream's end; false at the end of the stream.
class PathStream {
 public:
  PathStream(int fd, char separator) : fd_(fd), sep_(separator) {}
  bool next(size_t max, std::vector<Input>* out);

 private:
  bool take_record(std::vector<Input>* out);
  int fd_;
  char sep_;
  std::string buffer_;
  bool eof_ = false;
};

// A one-line progress bar on stderr, drawn only on a terminal.
class Progress {
 public:
  Progress(size_t total, bool enabled) : total_(total), on_(enabled), t0_(std::chrono::steady_clock::now()) {}
  void update(size_t done) {
    if (!on_) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const int width = 30, filled = int(width * done / std::max<size_t>(total_, 1));
    std::fprintf(stderr, "\r[%s%s] %zu/%zu  %.1f img/s ", std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(width - filled), '.').c_str(), done, total_, s > 0 ? double(done) / s : 0.0);
    std::fflush(stderr);
  }
  void clear() {
    if (on_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  size_t total_;
  bool on_;
  std::chrono::steady_clock::time_point t0_;
};


}  // namespace vit::app
