// The reference models of reference_models.h.
#include "reference_models.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>

#include "test_util.h"

namespace vit::test {

const std::string kVenvPython = VIT_SOURCE_DIR "/.venv/bin/python";

int run_shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> reference_photos() {
  const std::string dir = shared_data() + "/images/imagenet-samples/";
  return {dir + "n01440764_tench.JPEG", dir + "n02123597_Siamese_cat.JPEG", dir + "n02690373_airliner.JPEG"};
}

namespace {

// The last `lines` lines of a file ("" when it cannot be read).
std::string tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& line : last) out += line + "\n";
  return out;
}

}  // namespace

GeneratedModels generated_models(const std::string& folder, const std::vector<std::string>& scripts,
                                 const std::string& imports, const std::string& env) {
  GeneratedModels g;
  const std::string bin = VIT_BINARY;
  const std::string dir = bin.substr(0, bin.find_last_of('/')) + "/" + folder, errors = dir + ".stderr";
  // The import recorder is part of what the folder came from: its record is made again with the models.
  std::vector<std::string> sources = scripts;
  sources.push_back(VIT_SOURCE_DIR "/tests/record_imports.py");
  std::string same, copies;
  for (const std::string& s : sources) {
    same += (same.empty() ? "" : " && ") + std::string("cmp -s ") + s + " " + dir + "/" + s.substr(s.find_last_of('/') + 1);
    copies += " " + s;
  }
  g.ready = run_shell(same) == 0;
  if (g.ready || run_shell(kVenvPython + " -c 'import " + imports + "' >/dev/null 2>&1") == 0) g.dir = dir;
  if (g.ready || g.dir.empty()) return g;
  std::string make = env + "PYTHONUSERBASE=" VIT_PYTHON_USERBASE " VIT_IMPORT_LOG=" + dir + ".tmp/imports " +
                     kVenvPython + " " + scripts.front() + " " + dir + ".tmp";
  for (const auto& p : reference_photos()) make += " " + p;
  const std::string cmd = "flock " + dir + ".lock sh -c '" + same + " || { rm -rf " + dir + ".tmp " + errors +
                          " && " + make + " 2>" + errors + " && cp" + copies + " " + dir + ".tmp/ && rm -rf " + dir +
                          " && mv " + dir + ".tmp " + dir + "; }'";
  const int code = run_shell(cmd + " >/dev/null 2>&1");
  g.ready = code == 0;
  if (!g.ready) {
    g.error = scripts.front() + " failed (exit " + std::to_string(code) + "); the end of its error output (" +
              errors + "):\n" + tail(errors, 30);
    std::fprintf(stderr, "%s\n", g.error.c_str());
  }
  return g;
}

void expect_forward_like_reference(const std::string& label, ViT& m, const SafeTensors& ref) {
  const ViTConfig& c = m.config();
  const auto input = ref.to_f32("input");
  const int64_t B = ref.get("input").shape[0];
  ASSERT_EQ(int64_t(input.size()), B * c.input_floats()) << label << ": " << c.summary();
  auto plan = m.make_plan(B);
  std::memcpy(plan->input(), input.data(), input.size() * sizeof(float));
  plan->run();
  const int64_t T = c.tokens(), D = c.width, C = c.classes;
  ASSERT_EQ(ref.get("tokens").shape, (std::vector<int64_t>{B, T, D})) << label;
  const float tokens = max_abs_diff(plan->tokens(), ref.to_f32("tokens").data(), size_t(B * T * D));
  const float emb = max_abs_diff(plan->features(), ref.to_f32("embeddings").data(), size_t(B * D));
  const float out = C ? max_abs_diff(plan->logits(), ref.to_f32("outputs").data(), size_t(B * C))
                      : max_abs_diff(plan->features(), ref.to_f32("outputs").data(), size_t(B * D));
  EXPECT_LT(tokens, 1e-4f) << label;
  EXPECT_LT(emb, 1e-4f) << label;
  EXPECT_LT(out, 1e-4f) << label;
  std::printf("%s (%s): max |difference| from its reference: tokens %.2e, embeddings %.2e, outputs %.2e\n",
              label.c_str(), c.summary().c_str(), double(tokens), double(emb), double(out));
}

}  // namespace vit::test
