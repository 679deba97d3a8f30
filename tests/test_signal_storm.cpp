// A signal storm against the real DeiT-Tiny: tests/signal_storm.cpp, started with exec, classifies while
// every one of its threads is sent SIGUSR1 every 2 ms, under ONEDNN_MAX_CPU_ISA=AVX2 and with every linear
// layer a matmul (VIT_LINEAR_FORM=matmul: under the cap DeiT-Tiny's would be 1x1 convolutions) so that
// oneDNN's JIT GEMM kernels (which move the stack pointer into a heap workspace) run even on AVX-512 CPUs. The
// answers must be bit for bit those of the same process before the storm, and it must not crash.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "test_util.h"

namespace vit::test {
namespace {

struct Outcome {
  int status;  // as system() returns it
  std::string out;
};

Outcome run(const std::string& cmd) {
  TempDir d;
  const int status = std::system((cmd + " >" + d.file("out") + " 2>&1").c_str());
  return {status, read_file(d.file("out"))};
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}

std::string storm_command(const std::string& precision, int threads, int rounds, const std::string& env = "") {
  namespace fs = std::filesystem;
  std::vector<std::string> photos;
  for (const auto& e : fs::directory_iterator(shared_data() + "/images/imagenet-samples")) photos.push_back(e.path());
  std::sort(photos.begin(), photos.end());
  photos.resize(std::min<size_t>(photos.size(), 4));
  std::string cmd = "ONEDNN_MAX_CPU_ISA=AVX2 VIT_LINEAR_FORM=matmul " + env + SIGNAL_STORM + " " + shared_data() +
                    "/models/deit_tiny_patch16_224.fb_in1k " + precision + " " + std::to_string(threads) + " " +
                    std::to_string(rounds);
  for (const std::string& p : photos) cmd += " " + p;
  return cmd;
}

struct Case {
  const char* precision;
  int threads;
};

class SignalStorm : public ::testing::TestWithParam<Case> {};

TEST_P(SignalStorm, AnswersUnchangedAndNoCrash) {
  REQUIRE_SHARED_DATA();
  const Outcome r = run(storm_command(GetParam().precision, GetParam().threads, 3));
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << describe(r.status) << "\n" << r.out;
  EXPECT_NE(r.out.find("answers identical"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" 0 handled"), std::string::npos) << "no signal reached a handler: the storm tested nothing\n" << r.out;
}

INSTANTIATE_TEST_SUITE_P(Precisions, SignalStorm,
                         ::testing::Values(Case{"f32", 1}, Case{"f32", 2}, Case{"int8", 1}, Case{"int8", 2}),
                         [](const auto& i) { return std::string(i.param.precision) + "_" + std::to_string(i.param.threads) + "_threads"; });

// The storm is only a test if the kernels it is about run: under the AVX2 cap the f32 and int8 matmuls
// are oneDNN's gemm:jit.
TEST(SignalStormPremise, JitGemmRuns) {
  REQUIRE_SHARED_DATA();
  for (const char* precision : {"f32", "int8"}) {
    const Outcome r = run(storm_command(precision, 1, 0, "ONEDNN_VERBOSE=1 "));
    ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << describe(r.status) << "\n" << r.out;
    EXPECT_NE(r.out.find("gemm:jit"), std::string::npos) << precision << ": no gemm:jit primitive ran";
  }
}

}  // namespace
}  // namespace vit::test
