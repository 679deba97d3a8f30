// Reference models made at test time by a script run with the project's .venv Python (timm, transformers,
// open_clip), kept beside the vit binary and made again, under a lock, whenever a script they came from
// changes: the families and layouts tests share them. Each folder also keeps the record of what its
// generator imported and ran (tests/record_imports.py), which tests/dependency_audit.py checks.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "models/network.h"
#include "test_util.h"

namespace vit::test {

extern const std::string kVenvPython;

// A shell command's exit status (-1 when a signal ended it).
int run_shell(const std::string& cmd);

// The three sample photos the references are computed on.
std::vector<std::string> reference_photos();

struct GeneratedModels {
  std::string dir;     // empty when the venv lacks the Python modules
  bool ready = false;  // the models are there, made by the scripts as they are now
  std::string error;   // when the generator failed: the end of its error output (also printed to stderr)
};
// folder: its name beside the vit binary; scripts: the generator first (run as `env python SCRIPT DIR PHOTO...`),
// then any other source the models depend on (copied beside them); imports: the modules the venv must have.
GeneratedModels generated_models(const std::string& folder, const std::vector<std::string>& scripts,
                                 const std::string& imports, const std::string& env = "");

// What a suite of generated models needs: generated_models' arguments, what the venv lacks when they cannot
// be made (for the skip message), and whether the shared data (the photos) must be there.
struct GeneratorSpec {
  std::string folder;
  std::vector<std::string> scripts;
  std::string imports, env, lacks;
  bool needs_data = true;
};

// Our forward pass of `m` on a reference's own input tensor (`ref`'s "input"): tokens, embeddings and outputs
// (the logits, or the embeddings of a headless model) against the reference's "tokens", "embeddings" and
// "outputs", each within 1e-4; the differences printed after `label`.
void expect_forward_like_reference(const std::string& label, ViT& m, const SafeTensors& ref);

// A test suite over one generator's models, made once per suite: skipped when the venv lacks their modules
// (failed under CI=true), failed when the generator fails. Spec::get() gives its GeneratorSpec.
template <class Spec>
class GeneratedSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const GeneratorSpec s = Spec::get();
    if (s.needs_data && !have_shared_data()) return;
    const GeneratedModels g = generated_models(s.folder, s.scripts, s.imports, s.env);
    dir_ = g.dir;
    ready_ = g.ready;
  }
  void SetUp() override {
    const GeneratorSpec s = Spec::get();
    if (s.needs_data) REQUIRE_SHARED_DATA();
    if (dir_.empty()) {
      if (in_ci()) FAIL() << "CI=true but " << kVenvPython << " " << s.lacks << " (scripts/setup.sh installs tests/requirements.txt)";
      GTEST_SKIP() << kVenvPython << " " << s.lacks << " (pip install -r tests/requirements.txt into .venv); skipping";
    }
    ASSERT_TRUE(ready_) << s.scripts.front().substr(s.scripts.front().rfind("/tests/") + 1) << " failed";
  }
  static std::string model(const std::string& name) { return dir_ + "/" + name; }
  // Our forward pass of model `name` (at img_size; 0: its own) on the reference's own input tensor against
  // its file ref_name (expect_forward_like_reference), the differences printed after label(the model).
  template <class Label>
  static void expect_model_like_reference(const std::string& name, const std::string& ref_name, int64_t img_size,
                                          Label label) {
    const SafeTensors ref(model(name) + "/" + ref_name);
    ViT m = ViT::load(model(name), "", img_size);
    expect_forward_like_reference(label(m), m, ref);
  }
  static inline std::string dir_;
  static inline bool ready_ = false;
};

}  // namespace vit::test
