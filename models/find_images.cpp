// Finding the image files to classify in PATH arguments: folders walked recursively for image files, by
// `vit classify`, the Python module (vit.find_images) and the Spark job alike; see vit/vit.h.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "vit/vit.h"

namespace vit {
namespace {

namespace fs = std::filesystem;

std::string lower_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

bool is_image_name(const fs::path& p) {
  static const std::set<std::string> kImages{".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".jp2", ".j2k"};
  return kImages.count(lower_extension(p)) != 0;
}

// Appends dir's image files (and videos, with `videos`), sorted, recursing into sub-folders (each real
// folder once, so symlink loops end). Entries named like images that cannot be images (a folder, a
// broken symlink, a folder that cannot be read) become inputs carrying their error, so they get their
// output line.
void walk_folder(const fs::path& dir, bool videos, std::set<std::pair<dev_t, ino_t>>* seen,
                 std::vector<ImagePath>* out) {
  const auto wanted = [videos](const fs::path& p) { return is_image_name(p) || (videos && is_video_name(p.string())); };
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
      if (wanted(e))
        out->push_back({e.string(), fs::is_symlink(fs::symlink_status(e, ec)) ? "broken symbolic link" : ec.message()});
    } else if (fs::is_directory(status)) {
      if (wanted(e)) out->push_back({e.string(), "is a directory, not an image"});
      else walk_folder(e, videos, seen, out);
    } else if (wanted(e)) {
      out->push_back({e.string(), ""});
    }
  }
}

}  // namespace

bool is_video_name(const std::string& path) {
  static const std::set<std::string> kVideos{".mp4", ".mkv", ".avi", ".mov", ".webm"};
  return kVideos.count(lower_extension(path)) != 0;
}

std::vector<ImagePath> find_images(const std::vector<std::string>& paths, bool videos) {
  std::vector<ImagePath> out;
  for (const auto& p : paths) {
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      out.push_back({p, "no such file or directory"});
    } else if (fs::is_directory(st)) {
      std::set<std::pair<dev_t, ino_t>> seen;
      walk_folder(p, videos, &seen, &out);
    } else {
      out.push_back({p, ""});
    }
  }
  return out;
}

}  // namespace vit
