// The reference models of reference_models.h.
#include "reference_models.h"

#include <sys/wait.h>

#include <cstdlib>

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

GeneratedModels generated_models(const std::string& folder, const std::vector<std::string>& scripts,
                                 const std::string& imports, const std::string& env) {
  GeneratedModels g;
  const std::string bin = VIT_BINARY;
  const std::string dir = bin.substr(0, bin.find_last_of('/')) + "/" + folder;
  std::string same, copies;
  for (const std::string& s : scripts) {
    same += (same.empty() ? "" : " && ") + std::string("cmp -s ") + s + " " + dir + "/" + s.substr(s.find_last_of('/') + 1);
    copies += " " + s;
  }
  g.ready = run_shell(same) == 0;
  if (g.ready || run_shell(kVenvPython + " -c 'import " + imports + "' >/dev/null 2>&1") == 0) g.dir = dir;
  if (g.ready || g.dir.empty()) return g;
  std::string make = env + kVenvPython + " " + scripts.front() + " " + dir + ".tmp";
  for (const auto& p : reference_photos()) make += " " + p;
  const std::string cmd = "flock " + dir + ".lock sh -c '" + same + " || { rm -rf " + dir + ".tmp && " + make +
                          " && cp" + copies + " " + dir + ".tmp/ && rm -rf " + dir + " && mv " + dir + ".tmp " + dir +
                          "; }'";
  g.ready = run_shell(cmd + " >/dev/null 2>&1") == 0;
  return g;
}

}  // namespace vit::test
