// Gathering inputs from PATH arguments; see inputs.h.
#include "inputs.h"

#include <spdlog/spdlog.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <filesystem>
#include <set>

namespace vit::app {
namespace {

namespace fs = std::filesystem;

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
}

// Appends dir's image files, sorted, recursing into sub-folders (each real folder once, so symlink
// loops end). Entries named like images that cannot be images (a folder, a broken symlink, a
// folder that cannot be read) become inputs carrying their error, so they get their output line.
void walk_folder(const fs::path& dir, std::set<std::pair<dev_t, ino_t>>* seen, std::vector<Input>* out) {
  struct stat st{};
  if (::stat(dir.c_str(), &st) == 0 && !seen->insert({st.st_dev, st.st_ino}).second) return;
  std::error_code ec;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(it->path());
  if (ec) {
    out->push_back({dir.string(), "cannot read folder: " + ec.message()});
    return;
  }
  std::sort(entries.begin(), entries.end());
  for (const fs::path& e : entries) {
    const auto status = fs::status(e, ec);
    if (ec) {
      if (is_image_name(e))
        out->push_back({e.string(), fs::is_symlink(fs::symlink_status(e, ec)) ? "broken symbolic link" : ec.message()});
    } else if (fs::is_directory(status)) {
      if (is_image_name(e)) out->push_back({e.string(), "is a directory, not an image"});
      else walk_folder(e, seen, out);
    } else if (is_image_name(e)) {
      out->push_back({e.string(), ""});
    }
  }
}

}  // namespace

// PATH arguments in order; a folder contributes its image files, recursively, sorted by name.
// Only names are gathered here: images are read batch by batch as they are classified.
std::vector<Input> collect_inputs(const std::vector<std::string>& paths, bool* missing) {
  std::vector<Input> out;
  for (const auto& p : paths) {
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      out.push_back({p, "no such file or directory"});
      *missing = true;
    } else if (fs::is_directory(st)) {
      const size_t before = out.size();
      std::set<std::pair<dev_t, ino_t>> seen;
      walk_folder(p, &seen, &out);
      if (out.size() == before) spdlog::warn("{}: no .jpg, .jpeg, .png or .bmp files in this folder", p);
    } else {
      out.push_back({p, ""});
    }
  }
  return out;
}

bool PathStream::take_record(std::vector<Input>* out) {
  const size_t end = buffer_.find(sep_);
  if (end == std::string::npos && !(eof_ && !buffer_.empty())) return false;
  std::string path = buffer_.substr(0, end);
  buffer_.erase(0, end == std::string::npos ? buffer_.size() : end + 1);
  if (sep_ == '\n' && !path.empty() && path.back() == '\r') path.pop_back();
  if (!path.empty()) out->push_back({path, ""});
  return true;
}

bool PathStream::next(size_t max, std::vector<Input>* out) {
  out->clear();
  for (;;) {
    while (out->size() < max && take_record(out)) {
    }
    if (out->size() == max || (eof_ && buffer_.empty())) return !out->empty();
    // Wait for more only while there is nothing to hand out; else hand out what there is.
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, out->empty() ? -1 : 0);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return true;
    char chunk[65536];
    const ssize_t n = ::read(fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) eof_ = true;  // the end, or an unreadable stream: what arrived is still classified
    else buffer_.append(chunk, size_t(n));
  }
}

}  // namespace vit::app
