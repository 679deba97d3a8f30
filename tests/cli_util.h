// Running the `vit` binary from tests: its exit status and output, JSON lines, and a fixture with a tiny
// random model and a few images (three good, one broken, one not an image) written at test time.
#pragma once
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

namespace vit::test {

struct Result {
  int code;
  std::string out, err;
};

// `vit ARGS` through the shell (ARGS may hold redirections and pipes), stdout and stderr captured.
Result run_vit(const std::string& args);
// The same with environment assignments first ("ONEDNN_VERBOSE=1 ", with its trailing space).
Result run_vit_env(const std::string& env, const std::string& args);
std::vector<nlohmann::json> json_lines(const std::string& s);

class Cli : public ::testing::Test {
 protected:
  void SetUp() override;
  std::string model() const { return "--model " + model_.path(); }
  TempDir model_, images_;  // images_: a.jpg, b.PNG, c.bmp, d_broken.jpg, notes.txt
};

}  // namespace vit::test
