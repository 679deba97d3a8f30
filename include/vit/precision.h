// The arithmetic of a model's linear layers, and its names on the command line and in Python. A header
// of its own, standard types only, so that the engine and the public API (vit/vit.h) share it and the
// engine never includes the library's header.
#pragma once
#include <string>

namespace vit {

// F32 matches timm; BF16 (CPUs with avx512_bf16 or AMX) and Int8 (weights rounded at load or by vit
// quantize, each input row quantized as it runs) trade a little agreement for speed; each also takes
// attention's two products in its own precision where the CPU has it (int8: avx512_vnni; bf16: avx512_bf16).
enum class Precision { F32, BF16, Int8 };
Precision precision_from_name(const std::string& name);  // "f32", "bf16", "int8"; throws vit::Error
const char* precision_name(Precision p);

}  // namespace vit
