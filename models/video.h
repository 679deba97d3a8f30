// Classifying a video: its frames read through OpenCV's plugin (engine/image/opencv_io.h), sampled by count or
// by time, and classified a batch at a time; what vit::Classifier::classify_video runs (vit/vit.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vit/vit.h"

namespace vit {

int64_t classify_video_frames(const Classifier& classifier, const std::string& path, const VideoSampling& sampling,
                              int batch, int64_t max_pixels, int topk,
                              const std::function<void(const std::vector<Result>&)>& on_results,
                              const BetweenBatches& between);

}  // namespace vit
