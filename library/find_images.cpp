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

// The one list of each, in the order help texts show them.
const std::vector<std::string> kImageExtensions{".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".jp2", ".j2k"};
const std::vector<std::string> kVideoExtensions{".mp4", ".mkv", ".avi", ".mov", ".webm"};

bool listed(const std::vector<std::string>& list, const std::string& ext) {
  return std::find(list.begin(), list.end(), ext) != list.end();
}

std::string joined(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& e : list) out += (out.empty() ? "" : " ") + e;
  return out;
}

bool is_image_name(const fs::path& p) { return listed(kImageExtensions, lower_extension(p)); }

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

bool is_video_name(const std::string& path) { return listed(kVideoExtensions, lower_extension(path)); }

std::string image_extensions() { return joined(kImageExtensions); }
std::string video_extensions() { return joined(kVideoExtensions); }

std::vector<ImagePath> find_images(const std::vector<std::string>& paths, bool videos) {
  std::vector<ImagePath> out;
  for (const auto& p : paths) {
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      const bool link = fs::is_symlink(fs::symlink_status(p, ec));
      out.push_back({p, link ? "broken symbolic link" : "no such file or directory"});
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
