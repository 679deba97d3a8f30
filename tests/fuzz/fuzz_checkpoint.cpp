// libFuzzer target: arbitrary bytes as a safetensors checkpoint plus a config.json, loaded as a ViT
// (header parsing, layout detection, config resolution, shape checks, weight packing). Input layout:
// the config's length L as the last 2 bytes (little-endian), the config as the L bytes before them,
// the safetensors file as everything before that. Must end in a model or a vit::Error.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "vit/error.h"
#include "engine/nn/ops.h"
#include "models/network.h"

namespace {
// An in-memory file reachable by path, rewritten for each input.
struct MemFile {
  explicit MemFile(const char* name) : fd(memfd_create(name, 0)), path("/proc/self/fd/" + std::to_string(fd)) {}
  void set(const uint8_t* data, size_t size) const {
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != ssize_t(size))) __builtin_trap();
  }
  int fd;
  std::string path;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool init = (vit::set_threads(1), true);
  (void)init;
  static const MemFile model("model.safetensors"), config("config.json");
  size_t cfg_len = 0;
  if (size >= 2) cfg_len = size_t(data[size - 2]) | size_t(data[size - 1]) << 8;
  if (cfg_len > (size >= 2 ? size - 2 : 0)) cfg_len = 0;
  const size_t model_len = size >= 2 ? size - 2 - cfg_len : size;
  model.set(data, model_len);
  config.set(data + model_len, cfg_len);
  try {
    vit::ViT::load(model.path, cfg_len ? config.path : "");
  } catch (const vit::Error&) {
  }
  return 0;
}
