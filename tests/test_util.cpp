// Test helpers; see test_util.h.
#include "test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

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

Golden read_golden(const SafeTensors& st, const std::string& name) {
  const TensorView& t = st.get(name);
  Golden g;
  g.shape = t.shape;
  if (t.dtype == DType::U8) g.u8.assign(t.data, t.data + t.nbytes);
  else g.f32 = st.to_f32(name);
  return g;
}

}  // namespace vit::test
