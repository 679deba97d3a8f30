// Resolving class names; see labels.h.
#include "labels.h"

#include <sstream>

#include "engine/io/files.h"
#include "vit/imagenet_classes.h"
#include "vit/error.h"

namespace vit {

namespace {

// A labels file is class names, one a line: far below this (ImageNet-21k's are 0.4 MB).
constexpr uint64_t kMaxLabelsBytes = uint64_t(64) << 20;

}  // namespace

std::vector<std::string> resolve_labels(const std::string& labels_file, const ViTConfig& cfg) {
  std::vector<std::string> labels;
  if (cfg.pool.head != HeadKind::Classifier) {
    if (!labels_file.empty())
      throw ArgumentError(labels_file, std::string("labels name a classifier's classes, and the model has none (") +
                                           (cfg.pool.head == HeadKind::Projection
                                                ? "its head is a projection into an image-text space: text embeddings "
                                                  "label its images"
                                                : "no head: embeddings only") +
                                           ")");
    return labels;
  }
  if (!labels_file.empty()) {
    const std::vector<uint8_t> bytes = read_file_bytes(labels_file, kMaxLabelsBytes);  // no FIFO or device
    std::istringstream in(std::string(bytes.begin(), bytes.end()));
    for (std::string line; std::getline(in, line);) {
      if (labels.empty() && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      labels.push_back(line);
    }
    while (!labels.empty() && labels.back().empty()) labels.pop_back();
    if (int64_t(labels.size()) != cfg.classes)
      throw Error(labels_file, std::to_string(labels.size()) + " labels, but the model has " +
                                   std::to_string(cfg.classes) + " classes");
    return labels;
  }
  if (!cfg.labels.empty()) return cfg.labels;
  if (cfg.classes == 1000) return {kImageNetClasses, kImageNetClasses + 1000};
  for (int64_t i = 0; i < cfg.classes; ++i) labels.push_back("class_" + std::to_string(i));
  return labels;
}

}  // namespace vit
