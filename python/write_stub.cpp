// Writes the package's type stubs (vit/_vit.pyi) from python/vit/_vit.pyi.in at build time: the line holding
// @MODEL_OPTIONS@ becomes one keyword line per row of the model-wide option table (vit/load_options.h), with
// its type and default, so a new option reaches the stubs without an edit here or there.
#include <cstdio>
#include <string>

#include "engine/io/files.h"
#include "vit/error.h"
#include "vit/load_options.h"

namespace {

// Literal["f32", "bf16", "int8"]: the words an option takes.
std::string literal(const vit::LoadOption& o) {
  std::string s = "Literal[";
  for (const std::string& word : vit::option_choices(o)) s += (s.size() > 8 ? ", \"" : "\"") + word + "\"";
  return s + "]";
}

// `name: type = default,` as the stubs write a keyword of the option's kind.
std::string keyword_line(const vit::LoadOption& o) {
  const std::string dflt = vit::load_option_value(vit::LoadOptions{}, o);
  switch (o.kind) {
    case vit::OptionKind::Number: return std::string(o.name) + ": int = " + dflt + ",";
    case vit::OptionKind::Path: return std::string(o.name) + ": Optional[Path] = None,";
    case vit::OptionKind::Name: return std::string(o.name) + ": Optional[str] = None,";
    case vit::OptionKind::Precision: return std::string(o.name) + ": " + literal(o) + " = \"" + dflt + "\",";
    case vit::OptionKind::Pool: return std::string(o.name) + ": Optional[" + literal(o) + "] = None,";
  }
  return "";
}

std::string stubs(const std::string& in) {
  const std::string marker = "@MODEL_OPTIONS@";
  const size_t at = in.find(marker);
  if (at == std::string::npos || in.find(marker, at + 1) != std::string::npos)
    throw vit::Error("the stubs' template must hold " + marker + " once");
  const size_t line = in.rfind('\n', at) + 1;
  const std::string indent = in.substr(line, at - line);
  std::string lines;
  for (const vit::LoadOption& o : vit::load_option_table()) lines += indent + keyword_line(o) + "\n";
  return in.substr(0, line) + lines + in.substr(in.find('\n', at) + 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_stub TEMPLATE OUTPUT\n");
    return 2;
  }
  try {
    const std::vector<uint8_t> bytes = vit::read_file_bytes(argv[1], 1 << 20);
    const std::string out = stubs(std::string(bytes.begin(), bytes.end()));
    vit::OutputFile file(argv[2]);
    file.write(out.data(), out.size());
    file.commit();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_stub: %s\n", e.what());
    return 1;
  }
  return 0;
}
