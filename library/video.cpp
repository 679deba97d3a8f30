// Sampling, classifying and embedding a video's frames; see video.h. FFmpeg gives no reliable frame count, so a
// stream that stops early is recognised by FFmpeg's complaints or by fewer frames than its container
// announces, and reported with the number of frames that were read.
#include "video.h"

#include <cmath>
#include <memory>

#include "engine/image/opencv_io.h"
#include "library/runner.h"

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

// A frame sampled for the model, with where it was in the video.
struct Sampled {
  Image image;
  VideoReader::Frame tag;
};

// Reads the video's sampled frames, handing them to on_batch `batch` at a time in frame order (then
// checking `between`). Returns "" when the video was read whole, else why not: it cannot be opened (the
// reader's own message, nothing handed over) or it stops early, is damaged or has no frames.
std::string read_sampled_frames(const std::string& path, const VideoSampling& sampling, int batch, int64_t max_pixels,
                                const std::function<void(std::vector<Sampled>&)>& on_batch,
                                const BetweenBatches& between, bool* opened) {
  check_sampling(sampling);
  std::unique_ptr<VideoReader> video;
  try {
    video = std::make_unique<VideoReader>(path, max_pixels);
  } catch (const Error& e) {
    *opened = false;
    return e.problem();
  }
  *opened = true;
  std::vector<Sampled> frames;
  int64_t read = 0, damaged = 0, slot = -1;
  const auto flush = [&] {
    on_batch(frames);
    frames.clear();
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
      frames.push_back({video->retrieve(), f});
    } catch (const Error& e) {
      failure = e.problem();
      break;
    }
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
  return failure;
}

std::vector<Pixels> pixels_of(const std::string& path, const std::vector<Sampled>& frames) {
  std::vector<Pixels> pixels;
  for (const Sampled& s : frames) pixels.push_back({path, s.image.width, s.image.height, s.image.rgb.data()});
  return pixels;
}

}  // namespace

void check_sampling(const VideoSampling& sampling) {
  if (sampling.every < 0 || (sampling.every == 0 && !(sampling.fps > 0 && std::isfinite(sampling.fps))))
    throw Error("video sampling: every must be 1 or more, or fps positive (got every " + std::to_string(sampling.every) +
                ", fps " + std::to_string(sampling.fps) + ")");
}

int64_t classify_video_frames(const Classifier& classifier, const std::string& path, const VideoSampling& sampling,
                              int batch, int64_t max_pixels, int topk,
                              const std::function<void(const std::vector<Result>&)>& on_results,
                              const BetweenBatches& between) {
  int64_t classified = 0;
  bool opened = false;
  const std::string failure = read_sampled_frames(path, sampling, batch, max_pixels, [&](std::vector<Sampled>& frames) {
    std::vector<Result> results = classifier.classify_pixels(pixels_of(path, frames), topk, between);
    for (size_t i = 0; i < results.size(); ++i) {
      results[i].frame = frames[i].tag.index;
      results[i].time_s = frames[i].tag.time_s;
      if (results[i].error.empty()) ++classified;
    }
    on_results(results);
  }, between, &opened);
  if (!failure.empty()) {
    Result r;
    r.file = path;
    r.error = opened ? failure + "; " + std::to_string(classified) + " sampled frames classified" : failure;
    on_results({r});
  }
  return classified;
}

Embedding embed_video_frames(const Classifier& classifier, const std::string& path, const EmbedOptions& options,
                             int batch, int64_t max_pixels, const BetweenBatches& between) {
  EmbedOptions each = options;
  each.normalize = false;  // the mean of the frames' own embeddings; the caller normalizes the mean
  std::vector<double> sum, token_sum;  // double: a long video's sum keeps the precision of its frames'
  int64_t frames = 0;
  std::string frame_error;
  bool opened = false;
  std::string failure = read_sampled_frames(path, options.video, batch, max_pixels, [&](std::vector<Sampled>& batch_frames) {
    const std::vector<Embedding> got = classifier.embed_pixels(pixels_of(path, batch_frames), each, between);
    for (size_t i = 0; i < got.size(); ++i) {
      const Embedding& e = got[i];
      if (!e.error.empty()) {
        if (frame_error.empty()) frame_error = "frame " + std::to_string(batch_frames[i].tag.index) + ": " + e.error;
        continue;
      }
      sum.resize(e.embedding.size());
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += e.embedding[k];
      token_sum.resize(e.tokens.size());
      for (size_t k = 0; k < token_sum.size(); ++k) token_sum[k] += e.tokens[k];
      ++frames;
    }
  }, between, &opened);
  if (failure.empty()) failure = frame_error;
  Embedding out;
  out.file = path;
  if (!failure.empty()) {
    out.error = opened ? failure + "; the video is not embedded" : failure;
    return out;
  }
  for (double v : sum) out.embedding.push_back(float(v / double(frames)));
  for (double v : token_sum) out.tokens.push_back(float(v / double(frames)));
  return out;
}

}  // namespace vit
