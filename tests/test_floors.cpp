// The floors of docs/ARCHITECTURE.md, from every #include of the sources: apps -> library -> models ->
// engine, every arrow down. apps/ and python/ see only the public headers (include/vit) and the engine
// tools offered to everyone (engine/io: files, safetensors, names as bytes); the engine sees only itself
// and the public headers it shares (error, precision, limits, threads, cpu, topk); the public headers see
// only each other and the standard library.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "test_util.h"

namespace vit::test {
namespace {

namespace fs = std::filesystem;

// Which floor a source file is on, by its folder; "" for files on none (tests, tools).
std::string floor_of(const std::string& rel) {
  for (const char* f : {"include/vit/", "engine/io/", "engine/", "models/", "library/", "apps/", "python/"})
    if (rel.rfind(f, 0) == 0) return f;
  return "";
}

// What a floor may include, by the floor of the included file (for include/vit/: only these headers of it
// where listed). engine/ and models/ stand below the library: of its public headers they take only those
// they share with it (and implement), never vit.h's Classifier or the other library APIs.
struct Rule {
  std::vector<std::string> floors;
  std::vector<std::string> public_headers;  // empty: all of include/vit
};
const std::vector<std::string> kEngineShares = {"error.h", "precision.h", "limits.h", "threads.h", "cpu.h", "topk.h"};
const std::vector<std::string> kModelsShare = {"error.h",   "precision.h", "limits.h",      "threads.h",
                                               "cpu.h",     "topk.h",      "model_kinds.h", "model_files.h"};

const std::map<std::string, Rule>& rules() {
  static const std::map<std::string, Rule> r = {
      {"include/vit/", {{"include/vit/"}, {}}},
      {"engine/io/", {{"engine/io/", "engine/", "include/vit/"}, kEngineShares}},
      {"engine/", {{"engine/io/", "engine/", "include/vit/"}, kEngineShares}},
      {"models/", {{"engine/io/", "engine/", "models/", "include/vit/"}, kModelsShare}},
      {"library/", {{"engine/io/", "engine/", "models/", "library/", "include/vit/"}, {}}},
      {"apps/", {{"engine/io/", "apps/", "include/vit/"}, {}}},
      {"python/", {{"engine/io/", "python/", "include/vit/"}, {}}},
  };
  return r;
}

// An #include "..." as the compiler finds it: beside the including file, else from the repository root,
// else from include/.
std::string resolve(const fs::path& root, const fs::path& file, const std::string& name) {
  for (const fs::path& p : {file.parent_path() / name, root / name, root / "include" / name})
    if (fs::exists(p)) return fs::relative(fs::canonical(p), fs::canonical(root)).generic_string();
  return "";
}

// Every include in the tree below root that breaks a floor's rule, as "file: includes what (floor)".
std::vector<std::string> floor_violations(const fs::path& root) {
  std::vector<std::string> out;
  const std::regex quoted(R"(^\s*#\s*include\s*"([^"]+)\")"), angled(R"(^\s*#\s*include\s*<([^>]+)>)");
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(entry.path(), root).generic_string(), ext = entry.path().extension().string();
    const std::string floor = floor_of(rel);
    if (!entry.is_regular_file() || floor.empty() || (ext != ".cpp" && ext != ".h")) continue;
    const Rule& rule = rules().at(floor);
    std::ifstream in(entry.path());
    std::smatch m;
    for (std::string line; std::getline(in, line);) {
      if (floor == "include/vit/" && std::regex_search(line, m, angled) &&
          (m[1].str().find('/') != std::string::npos || m[1].str().find('.') != std::string::npos))
        out.push_back(rel + ": includes <" + m[1].str() + ">, not a standard header");
      if (!std::regex_search(line, m, quoted)) continue;
      const std::string target = resolve(root, entry.path(), m[1].str()), to = floor_of(target);
      const std::string name = target.substr(target.find_last_of('/') + 1);
      bool ok = std::find(rule.floors.begin(), rule.floors.end(), to) != rule.floors.end();
      if (ok && to == "include/vit/" && !rule.public_headers.empty())
        ok = std::find(rule.public_headers.begin(), rule.public_headers.end(), name) != rule.public_headers.end();
      if (target.empty()) ok = false;
      if (!ok) out.push_back(rel + ": includes \"" + m[1].str() + "\" (" + (target.empty() ? "not found" : target) + ")");
    }
  }
  return out;
}

TEST(Floors, EveryIncludePointsToItsOwnFloorOrOneBelow) {
  const std::vector<std::string> bad = floor_violations(VIT_SOURCE_DIR);
  std::string all;
  for (const std::string& b : bad) all += "  " + b + "\n";
  EXPECT_TRUE(bad.empty()) << "includes that cross the floors (docs/ARCHITECTURE.md):\n" << all;
}

// The check itself finds each kind of crossing, in a small tree of its own.
TEST(Floors, TheCheckFindsEachKindOfCrossing) {
  TempDir d;
  const fs::path root = d.path();
  const auto write = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  for (const char* h : {"include/vit/vit.h", "include/vit/error.h", "include/vit/model_kinds.h", "engine/io/files.h",
                        "engine/nn/ops.h", "models/network.h", "library/runner.h", "apps/options.h"})
    write(h, "#pragma once\n");
  write("apps/ok.cpp", "#include \"options.h\"\n#include \"vit/vit.h\"\n#include \"engine/io/files.h\"\n#include <vector>\n");
  write("library/ok.cpp", "#include \"models/network.h\"\n#include \"engine/nn/ops.h\"\n#include \"runner.h\"\n");
  EXPECT_TRUE(floor_violations(root).empty());
  write("apps/a.cpp", "#include \"models/network.h\"\n#include \"library/runner.h\"\n  #  include \"engine/nn/ops.h\"\n");
  write("python/p.cpp", "#include \"models/network.h\"\n");
  write("models/m.h", "#include \"library/runner.h\"\n#include \"vit/vit.h\"\n#include \"vit/model_kinds.h\"\n");
  write("engine/nn/e.cpp", "#include \"models/network.h\"\n#include \"vit/vit.h\"\n#include \"vit/error.h\"\n");
  write("include/vit/x.h", "#include <oneapi/dnnl/dnnl.hpp>\n#include \"engine/nn/ops.h\"\n#include \"missing.h\"\n");
  std::vector<std::string> bad = floor_violations(root);
  std::sort(bad.begin(), bad.end());
  EXPECT_EQ(bad, (std::vector<std::string>{
                     "apps/a.cpp: includes \"engine/nn/ops.h\" (engine/nn/ops.h)",
                     "apps/a.cpp: includes \"library/runner.h\" (library/runner.h)",
                     "apps/a.cpp: includes \"models/network.h\" (models/network.h)",
                     "engine/nn/e.cpp: includes \"models/network.h\" (models/network.h)",
                     "engine/nn/e.cpp: includes \"vit/vit.h\" (include/vit/vit.h)",
                     "include/vit/x.h: includes \"engine/nn/ops.h\" (engine/nn/ops.h)",
                     "include/vit/x.h: includes \"missing.h\" (not found)",
                     "include/vit/x.h: includes <oneapi/dnnl/dnnl.hpp>, not a standard header",
                     "models/m.h: includes \"library/runner.h\" (library/runner.h)",
                     "models/m.h: includes \"vit/vit.h\" (include/vit/vit.h)",
                     "python/p.cpp: includes \"models/network.h\" (models/network.h)",
                 }));
}

}  // namespace
}  // namespace vit::test
