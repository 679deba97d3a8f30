// PositionTables (position_tables.h): timm's per-grid resampling of a learned position table, cached.
#include "engine/preprocess/position_tables.h"

#include <algorithm>
#include <string>

#include "vit/error.h"

namespace vit {

PositionTables::PositionTables(std::vector<float> table, int rows, int cols, int64_t width, Filter filter,
                               size_t capacity)
    : table_(std::make_shared<const std::vector<float>>(std::move(table))),
      rows_(rows),
      cols_(cols),
      width_(width),
      filter_(filter),
      capacity_(std::max<size_t>(capacity, 1)) {
  if (filter != Filter::Bilinear && filter != Filter::Bicubic)
    throw Error(std::string("position tables are resized by antialiased bilinear or bicubic interpolation, not ") +
                filter_name(filter));
  if (rows <= 0 || cols <= 0 || width <= 0 || int64_t(table_->size()) != int64_t(rows) * cols * width)
    throw Error("a position table of " + std::to_string(table_->size()) + " values is not " + std::to_string(rows) +
                " x " + std::to_string(cols) + " x " + std::to_string(width));
}

std::shared_ptr<const std::vector<float>> PositionTables::get(PatchGrid grid) {
  if (grid.rows <= 0 || grid.cols <= 0)
    throw Error("no position table for a grid of " + std::to_string(grid.rows) + " x " + std::to_string(grid.cols));
  // timm: `if (size[0] == orig_h) and (size[1] == orig_w)`: the table itself.
  if (grid.rows == rows_ && grid.cols == cols_) return table_;
  const Key key{grid.rows, grid.cols};
  {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = entries_.find(key);
    if (it != entries_.end()) {
      ages_.splice(ages_.begin(), ages_, it->second.age);
      return it->second.table;
    }
  }
  auto made = std::make_shared<const std::vector<float>>(
      resample_grid(table_->data(), rows_, cols_, int(width_), grid.rows, grid.cols, filter_));
  const std::lock_guard<std::mutex> lock(mu_);
  ++made_;
  const auto it = entries_.find(key);
  if (it != entries_.end()) {  // another thread made it meanwhile: the same values, kept once
    ages_.splice(ages_.begin(), ages_, it->second.age);
    return it->second.table;
  }
  ages_.push_front(key);
  entries_.emplace(key, Entry{made, ages_.begin()});
  if (entries_.size() > capacity_) {
    entries_.erase(ages_.back());
    ages_.pop_back();
  }
  return made;
}

size_t PositionTables::cached() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

size_t PositionTables::made() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return made_;
}

}  // namespace vit
