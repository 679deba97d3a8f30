// The names of the precisions of vit/precision.h, as the command line, the Python module and
// `vit inspect` spell them.
#include "vit/precision.h"

#include "vit/error.h"

namespace vit {

namespace {

// Each precision and its name, in the enum's order.
constexpr struct {
  Precision precision;
  const char* name;
} kNames[] = {{Precision::F32, "f32"}, {Precision::BF16, "bf16"}, {Precision::Int8, "int8"}};

}  // namespace

Precision precision_from_name(const std::string& name) {
  for (const auto& n : kNames)
    if (name == n.name) return n.precision;
  throw Error("precision '" + name + "' is not one of f32, bf16, int8");
}

const char* precision_name(Precision p) {
  for (const auto& n : kNames)
    if (n.precision == p) return n.name;
  return "?";
}

}  // namespace vit
