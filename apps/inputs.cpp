// Gathering inputs from PATH arguments; see inputs.h.
#include "apps/inputs.h"

#include <spdlog/spdlog.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <iterator>

namespace vit::app {

// PATH arguments in order (the library's find_images), with what the command line adds: a folder without
// images is warned about. A PATH that does not exist is one input with its error, as a file that cannot
// be read is (exit 1, the others done, as `cat` does): --stdin cannot check its paths before the work
// either.
std::vector<Input> collect_inputs(const std::vector<std::string>& paths, bool videos) {
  std::vector<Input> out;
  for (const auto& p : paths) {
    std::vector<Input> found = find_images({p}, videos);
    std::error_code ec;
    if (found.empty() && std::filesystem::is_directory(p, ec))
      spdlog::warn("{}: no image files ({}){} in this folder", p, image_extensions(),
                   videos ? " or videos (" + video_extensions() + ")" : "");
    out.insert(out.end(), std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
  }
  return out;
}

bool PathStream::take_record(std::vector<Input>* out) {
  const size_t end = buffer_.find(sep_);
  if (end == std::string::npos && !(eof_ && !buffer_.empty())) return false;
  std::string path = buffer_.substr(0, end);
  buffer_.erase(0, end == std::string::npos ? buffer_.size() : end + 1);
  if (sep_ == '\n' && !path.empty() && path.back() == '\r') path.pop_back();
  // A byte order mark opening the stream (lists written on Windows) is not part of the first name.
  if (first_ && path.rfind("\xEF\xBB\xBF", 0) == 0) path.erase(0, 3);
  first_ = false;
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

// The counts always; the bar in what width the terminal leaves (at most 30, none below 5); the whole
// line cut to the terminal's width minus one, so the cursor never wraps onto a new line.
void Progress::update(size_t done) {
  if (!on_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  char counts[96];
  std::snprintf(counts, sizeof(counts), " %zu/%zu  %.1f img/s", done, total_, s > 0 ? double(done) / s : 0.0);
  winsize ws{};
  const int columns = ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  const int width = std::min(30, columns - 1 - int(std::strlen(counts)) - 2);
  std::string line;
  if (width >= 5) {
    const int filled = int(int64_t(width) * int64_t(done) / int64_t(std::max<size_t>(total_, 1)));
    line = "[" + std::string(size_t(filled), '#') + std::string(size_t(width - filled), '.') + "]";
  }
  line += counts;
  line.resize(std::min(line.size(), size_t(std::max(columns - 1, 1))));
  std::fprintf(stderr, "\r%s\033[K", line.c_str());
  std::fflush(stderr);
}

void Progress::clear() {
  if (on_) std::fprintf(stderr, "\r\033[K");
}

}  // namespace vit::app
