// Sampling and classifying a video's frames; see video.h. FFmpeg gives no reliable frame count, so a
// stream that stops early is recognised by FFmpeg's complaints or by fewer frames than its container
// announces, and reported with the number of frames that were read.
#include "video.h"

#include <cmath>
#include <memory>

#include "engine/image/opencv_io.h"
#include "models/runner.h"

namespace vit {
namespace {

// Whether frame f is sampled: every Nth, or the first frame at or after each multiple of 1/fps seconds
// (*slot: the last multiple taken).
bool sampled(const VideoReader::Frame& f, const VideoSampling& s, int64_t* slot) {
  if (s.every > 0) return f.index % s.every == 0;
  const auto k = int64_t(std::floor(f.time_s * s.fps + 1e-6));  // 1e-6: 29.97 fps times land a hair early
  if (k <= *slot) return false;
  *slot = k;
  return true;
}

}  // namespace

int64_t classify_video_frames(const Classifier& classifier, const std::string& path, const VideoSampling& sampling,
                              int batch, int64_t max_pixels, int topk,
                              const std::function<void(const std::vector<Result>&)>& on_results,
                              const BetweenBatches& between) {
  if (sampling.every < 0 || (sampling.every == 0 && !(sampling.fps > 0 && std::isfinite(sampling.fps))))
    throw Error("video sampling: every must be 1 or more, or fps positive (got every " + std::to_string(sampling.every) +
                ", fps " + std::to_string(sampling.fps) + ")");
  const auto fail = [&](const std::string& why) {
    Result r;
    r.file = path;
    r.error = why;
    on_results({r});
  };
  std::unique_ptr<VideoReader> video;
  try {
    video = std::make_unique<VideoReader>(path, max_pixels);
  } catch (const Error& e) {
    fail(e.problem());
    return 0;
  }
  std::vector<Image> frames;
  std::vector<VideoReader::Frame> tags;
  int64_t classified = 0, read = 0, damaged = 0, slot = -1;
  const auto flush = [&] {
    std::vector<Pixels> pixels;
    for (size_t i = 0; i < frames.size(); ++i)
      pixels.push_back({path, frames[i].width, frames[i].height, frames[i].rgb.data()});
    std::vector<Result> results = classifier.classify_pixels(pixels, topk, between);
    for (size_t i = 0; i < results.size(); ++i) {
      results[i].frame = tags[i].index;
      results[i].time_s = tags[i].time_s;
      if (results[i].error.empty()) ++classified;
    }
    frames.clear();
    tags.clear();
    on_results(results);
    check_between(between);
  };
  std::string failure;
  for (VideoReader::Frame f{}; video->grab(&f);) {
    ++read;
    if (video->frame_damaged()) {  // FFmpeg reported an error decoding it: its pixels cannot be trusted
      ++damaged;
      continue;
    }
    if (!sampled(f, sampling, &slot)) continue;
    try {
      frames.push_back(video->retrieve());
    } catch (const Error& e) {
      failure = e.problem();
      break;
    }
    tags.push_back(f);
    if (int(frames.size()) == batch) flush();
  }
  if (!frames.empty()) flush();
  const int64_t announced = video->announced_frames();
  const std::string problem = video->problem();
  // Some containers' counts are estimates: one frame short is not taken for a truncation.
  if (failure.empty() && (damaged > 0 || (announced > 0 && read + 1 < announced))) {
    failure = "video stops early or is damaged: " + std::to_string(read) + " frames read";
    if (announced > read) failure += " of the " + std::to_string(announced) + " its container announces";
    if (damaged > 0) failure += ", " + std::to_string(damaged) + " of them damaged and skipped";
    if (!problem.empty()) failure += " (FFmpeg: " + problem + ")";
  }
  if (read == 0 && failure.empty()) failure = "video has no frames" + (problem.empty() ? "" : " (FFmpeg: " + problem + ")");
  if (!failure.empty()) fail(failure + "; " + std::to_string(classified) + " sampled frames classified");
  return classified;
}

}  // namespace vit
