// Memory the engine owns: 64-byte aligned, on transparent huge pages where the kernel offers them (a
// page fault per 2 MiB instead of per 4 KiB). A growing arena holds weights, handed out in pieces that
// never move; a fixed one holds a forward pass's activations, laid out by a BufferTable. Sizes in bytes.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vit {

class Arena {
 public:
  Arena() = default;                 // growing: alloc() adds chunks of at least 16 MiB as needed
  static Arena fixed(size_t bytes);  // one block of this size; alloc() beyond it throws
  Arena(Arena&& o) noexcept { *this = std::move(o); }
  Arena& operator=(Arena&& o) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  void* alloc(size_t bytes);  // 64-byte aligned
  template <typename T>
  T* alloc_array(size_t count) {
    return static_cast<T*>(alloc(count * sizeof(T)));
  }
  size_t bytes_used() const;

 private:
  struct Chunk {
    uint8_t* p;
    size_t bytes, used;
  };
  static Chunk new_chunk(size_t bytes);
  std::vector<Chunk> chunks_;
  bool fixed_ = false;
};

// Values copied into an arena, readable while it lives: the weights that are not a oneDNN memory (tokens,
// tables, int8 scales), so that the arena holds, and bytes_used() counts, every weight.
template <typename T>
class Stored {
 public:
  Stored() = default;
  Stored(Arena& a, const std::vector<T>& v) : n_(v.size()) {
    if (v.empty()) return;
    T* p = a.alloc_array<T>(v.size());
    std::copy(v.begin(), v.end(), p);
    p_ = p;
  }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

 private:
  const T* p_ = nullptr;
  size_t n_ = 0;
};

// Named buffers and their sizes. The arena's size and the buffers' places both come from these entries,
// so they cannot disagree: carve() sizes one fixed arena and points every buffer into it.
class BufferTable {
 public:
  template <typename T>
  void add(const char* name, T** slot, int64_t count) {
    entries_.push_back({name, round_up(size_t(count) * sizeof(T)), [slot](void* p) { *slot = static_cast<T*>(p); }});
  }
  size_t bytes() const;
  Arena carve() const;
  std::string largest() const;  // "scores (3.7 MiB)", for logs

 private:
  static size_t round_up(size_t bytes) { return (bytes + 63) / 64 * 64; }
  struct Entry {
    const char* name;
    size_t bytes;
    std::function<void(void*)> assign;
  };
  std::vector<Entry> entries_;
};

}  // namespace vit
