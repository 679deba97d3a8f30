// Test helpers; see test_util.h.
#include "test_util.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

#include "vit/error.h"

namespace vit::test {

std::string shared_data() {
  if (const char* e = std::getenv("VIT_SHARED_DATA")) return e;
  return VIT_SOURCE_DIR "/../shared/data";
}

bool have_shared_data() { return std::filesystem::exists(shared_data() + "/models/deit_tiny_patch16_224.fb_in1k"); }

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "vit-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  return max_abs_diff(a.data(), b.data(), std::min(a.size(), b.size()));
}

std::string expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "no error; expected one with: " << fragment;
  return "";
}

std::string test_data(const std::string& name) { return VIT_SOURCE_DIR "/tests/data/" + name; }

Golden read_golden(const SafeTensors& st, const std::string& name) {
  const TensorView& t = st.get(name);
  Golden g;
  g.shape = t.shape;
  if (t.dtype == DType::U8) g.u8 = st.bytes(name);
  else g.f32 = st.to_f32(name);
  return g;
}

std::vector<ModelsMdRow> models_md() {
  std::vector<ModelsMdRow> rows;
  std::istringstream in(read_file(VIT_SOURCE_DIR "/docs/MODELS.md"));
  const std::regex row(R"(\| `([^`]+)` \| (yes|no) \| (.*) \|)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_match(line, m, row)) rows.push_back({m[1], m[2] == "yes", m[3]});
  return rows;
}

}  // namespace vit::test
