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

// PATH arguments in order; a folder contributes its image files, and with `videos` its videos
// (vit::find_images). A PATH that does not exist, or a broken symbolic link, is an input with its error.
std::vector<Input> collect_inputs(const std::vector<std::string>& paths, bool videos = false);

// Paths from a stream (one per line, or NUL-separated as find -print0 writes), handed out as soon as
// they arrive: next() returns up to `max` of them, fewer when no more input is ready yet, so a pipeline
// (find | vit classify --stdin, xargs, Spark's RDD.pipe) sees each batch's results without waiting for
// the stream's end; false at the end of the stream. Lines may end in CRLF and the stream may open
// with a UTF-8 byte order mark, as lists written on Windows do.
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
  bool first_ = true;  // the first record: a UTF-8 byte order mark before it is dropped
};

// A one-line progress bar on stderr, drawn only on a terminal, never wider than it (so it never wraps).
class Progress {
 public:
  Progress(size_t total, bool enabled) : total_(total), on_(enabled), t0_(std::chrono::steady_clock::now()) {}
  void update(size_t done);
  void clear();

 private:
  size_t total_;
  bool on_;
  std::chrono::steady_clock::time_point t0_;
};


}  // namespace vit::app
