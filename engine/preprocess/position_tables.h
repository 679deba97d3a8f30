// A learned position table resized to each image's own grid of patches, as timm's NaFlexEmbeds does at
// run time (_apply_learned_naflex_pos_embed: F.interpolate(mode, align_corners=False, antialias=True), the
// table itself at its own size): once per grid, kept for the next image with that grid. A server meets a
// few grids over and over; the cache keeps the most recently used ones.
#pragma once
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/preprocess/naflex.h"
#include "engine/preprocess/resample.h"

namespace vit {

class PositionTables {
 public:
  // table: [rows, cols, width] (timm's pos_embed [1, rows, cols, width]); filter: Bilinear or Bicubic
  // (timm's pos_embed_interp_mode), anything else refused; capacity: how many grids' tables are kept.
  PositionTables(std::vector<float> table, int rows, int cols, int64_t width, Filter filter, size_t capacity = 64);

  // The table for a grid, [grid.rows * grid.cols, width] in row-major order of the grid: made on the first
  // call for that grid (outside the lock: other grids are served meanwhile), shared afterwards. Safe to
  // call from any thread; the table stays valid while the pointer is held, even once evicted.
  std::shared_ptr<const std::vector<float>> get(PatchGrid grid);

  int64_t width() const { return width_; }
  PatchGrid grid() const { return {rows_, cols_}; }
  size_t cached() const;  // grids held now
  size_t made() const;    // tables resized so far (two threads meeting a new grid at once may both make it)

 private:
  using Key = std::pair<int, int>;
  struct Entry {
    std::shared_ptr<const std::vector<float>> table;
    std::list<Key>::iterator age;
  };
  const std::shared_ptr<const std::vector<float>> table_;
  const int rows_, cols_;
  const int64_t width_;
  const Filter filter_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::map<Key, Entry> entries_;
  std::list<Key> ages_;  // most recently used first
  size_t made_ = 0;
};

}  // namespace vit
