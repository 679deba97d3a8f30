// Arena chunks and BufferTable carving; see arena.h.
#include "engine/nn/arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "vit/error.h"

namespace vit {

Arena::Chunk Arena::new_chunk(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  bytes = (std::max<size_t>(bytes, 64) + align - 1) / align * align;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(align, bytes));
  if (!p) throw Error("out of memory: cannot allocate " + std::to_string(bytes >> 20) + " MiB");
  if (align == kHuge) ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only
  return {p, bytes, 0};
}

Arena Arena::fixed(size_t bytes) {
  Arena a;
  a.chunks_.push_back(new_chunk(bytes));
  a.fixed_ = true;
  return a;
}

Arena& Arena::operator=(Arena&& o) noexcept {
  if (this != &o) {
    for (auto& c : chunks_) std::free(c.p);
    chunks_ = std::move(o.chunks_);
    fixed_ = o.fixed_;
    o.chunks_.clear();
  }
  return *this;
}

Arena::~Arena() {
  for (auto& c : chunks_) std::free(c.p);
}

void* Arena::alloc(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  if (chunks_.empty() || chunks_.back().used + bytes > chunks_.back().bytes) {
    if (fixed_)
      throw Error("internal: a fixed arena of " + std::to_string(chunks_.back().bytes) + " bytes has no room for " +
                  std::to_string(bytes) + " more");
    chunks_.push_back(new_chunk(std::max(bytes, size_t(16) << 20)));
  }
  Chunk& c = chunks_.back();
  void* p = c.p + c.used;
  c.used += bytes;
  return p;
}

size_t Arena::bytes_used() const {
  size_t n = 0;
  for (const Chunk& c : chunks_) n += c.used;
  return n;
}

size_t BufferTable::bytes() const {
  size_t n = 0;
  for (const Entry& e : entries_) n += e.bytes;
  return n;
}

Arena BufferTable::carve() const {
  Arena a = Arena::fixed(bytes());
  for (const Entry& e : entries_) e.assign(a.alloc(e.bytes));
  return a;
}

std::string BufferTable::largest() const {
  const Entry* top = nullptr;
  for (const Entry& e : entries_)
    if (!top || e.bytes > top->bytes) top = &e;
  if (!top) return "none";
  char mib[32];
  std::snprintf(mib, sizeof(mib), "%.1f", double(top->bytes) / 1048576.0);
  return std::string(top->name) + " (" + mib + " MiB)";
}

}  // namespace vit
