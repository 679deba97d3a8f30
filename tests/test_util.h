// Helpers shared by the tests: where ../shared/data is, skipping (or failing in CI) without it,
// temporary folders and reading safetensors goldens (model files to test with: model_files.h).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "model_files.h"

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

// The largest |a[i] - b[i]|; the sizes must agree (a failure otherwise).
float max_abs_diff(const float* a, const float* b, size_t n);
float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

// Runs f, which must throw vit::Error with `fragment` in its message; returns the message ("" after a failure).
std::string expect_error(const std::function<void()>& f, const std::string& fragment);

// docs/MODELS.md's rows: each timm architecture, whether the engine runs it, and its family or why it is refused.
struct ModelsMdRow {
  std::string arch;
  bool runs = false;
  std::string why;
};
std::vector<ModelsMdRow> models_md();

// The committed goldens of tests/data (Pillow and torch outputs; tests/data/make_goldens.py).
std::string test_data(const std::string& name);

struct Golden {
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<uint8_t> u8;
};
Golden read_golden(const SafeTensors& st, const std::string& name);

}  // namespace vit::test
