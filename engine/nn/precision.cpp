// The names of the precisions of vit/precision.h, as the command line, the Python module and
// `vit inspect` spell them.
#include "vit/precision.h"

#include "vit/error.h"

namespace vit {

Precision precision_from_name(const std::string& name) {
  if (name == "f32") return Precision::F32;
  if (name == "bf16") return Precision::BF16;
  if (name == "int8") return Precision::Int8;
  throw Error("precision '" + name + "' is not one of f32, bf16, int8");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::F32: return "f32";
    case Precision::BF16: return "bf16";
    case Precision::Int8: return "int8";
  }
  return "?";
}

}  // namespace vit
