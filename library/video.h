// Classifying and embedding a video: its frames read through OpenCV's plugin (engine/image/opencv_io.h),
// sampled by count or by time, a batch at a time; what vit::Classifier::classify_video and embed_video
// run (vit/vit.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vit/vit.h"

namespace vit {

// Refuses sampling that takes no frame (every < 0, or every 0 with fps not positive and finite), naming both.
void check_sampling(const VideoSampling& sampling);

int64_t classify_video_frames(const Classifier& classifier, const std::string& path, const VideoSampling& sampling,
                              int batch, int64_t max_pixels, int topk,
                              const std::function<void(const std::vector<Result>&)>& on_results,
                              const BetweenBatches& between);

// The mean of the sampled frames' embeddings, unnormalized whatever options.normalize says.
Embedding embed_video_frames(const Classifier& classifier, const std::string& path, const EmbedOptions& options,
                             int batch, int64_t max_pixels, const BetweenBatches& between);

}  // namespace vit
