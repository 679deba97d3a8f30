// Helpers shared by the tests: where ../shared/data is, skipping (or failing in CI) without it,
// temporary folders, a tiny random timm-layout checkpoint, and reading safetensors goldens.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/safetensors.h"

namespace vit::test {

std::string shared_data();  // VIT_SHARED_DATA env, else ../shared/data beside the source tree
bool have_shared_data();

// In CI (CI=true) missing data is a failure; elsewhere the test is skipped with a message.
#define REQUIRE_SHARED_DATA()                                                                            \
  do {                                                                                                   \
    if (!::vit::test::have_shared_data()) {                                                              \
      if (::vit::test::in_ci()) FAIL() << "CI=true but the test data is missing: " << ::vit::test::shared_data(); \
      GTEST_SKIP() << "test data not found at " << ::vit::test::shared_data()                            \
                   << " (set VIT_SHARED_DATA); skipping";                                                \
    }                                                                                                    \
  } while (0)

bool in_ci();

// A fresh empty folder under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale = 1.f, float offset = 0.f);
void write_file(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);

// A tiny ViT in timm's names, as a name -> (shape, values) map.
struct TinySpec {
  int64_t D = 32, depth = 2, heads = 2, mlp = 64, patch = 8, img = 32, classes = 10;
  bool class_token = true, dist_token = false, no_embed_class = false, fc_norm = false;
};
using TensorMap = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;
TensorMap tiny_vit_tensors(const TinySpec& s, uint32_t seed);
void write_tensors(const std::string& path, const TensorMap& t);
// Writes model.safetensors and a timm config.json (heads, pooling, input size) into dir.
void write_tiny_model(const std::string& dir, const TinySpec& s, uint32_t seed = 1);

struct Golden {
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<uint8_t> u8;
};
Golden read_golden(const SafeTensors& st, const std::string& name);

}  // namespace vit::test
