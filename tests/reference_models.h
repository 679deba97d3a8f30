// Reference models made at test time by a script run with the project's .venv Python (timm, transformers,
// open_clip), kept beside the vit binary and made again, under a lock, whenever a script they came from
// changes: the families and layouts tests share them. Each folder also keeps the record of what its
// generator imported and ran (tests/record_imports.py), which tests/dependency_audit.py checks.
#pragma once
#include <string>
#include <vector>

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

}  // namespace vit::test
