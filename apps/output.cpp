// See output.h.
#include "apps/output.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <cstdio>
#include <cstring>

#include "engine/io/files.h"
#include "engine/io/safetensors.h"
#include "engine/io/text.h"
#include "vit/error.h"

namespace vit::app {
namespace {

// The engine holds asynchronous signals back while a forward pass runs (engine/nn/signals.h), so this
// runs between passes, on a real stack, and a Ctrl-C ends the run when the current pass does. It only
// unlinks names kept in static storage, then ends the process as the signal would.
void on_signal(int sig) {
  remove_unfinished_outputs();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void install_signal_handlers() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) std::signal(sig, on_signal);
}

void check_stdout() {
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  if (errno == EPIPE) on_signal(SIGPIPE);
  throw WriteError("stdout", std::string("write failed: ") + std::strerror(errno));
}

std::string json_line(const std::string& file, const nlohmann::json& rest) {
  // Labels come from files too: bytes that are not UTF-8 become U+FFFD there rather than end the run.
  const std::string body = rest.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "{\"file\":" + json_string(file) + (body.size() > 2 ? "," + body.substr(1) : "}");
}

std::map<std::string, std::string> output_metadata(const std::string& command, std::map<std::string, std::string> rest) {
  rest[kWrittenByKey] = "vit " + command;
  return rest;
}

namespace {

// Where a path points: the file's device and inode, or for a path not there (yet) its folder's and its
// name, so that a file about to be created in the model's folder is recognised too.
struct Place {
  dev_t dev = 0;
  ino_t ino = 0;
  std::string name;  // "" for an existing file
  bool known = false;
};

Place place_of(const std::string& path) {
  if (path.empty()) return {};
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) return {st.st_dev, st.st_ino, "", true};
  const std::filesystem::path p(path);
  const std::string parent = p.parent_path().empty() ? "." : p.parent_path().string();
  if (::stat(parent.c_str(), &st) == 0) return {st.st_dev, st.st_ino, p.filename().string(), true};
  return {};
}

bool same_place(const Place& a, const Place& b) {
  return a.known && b.known && a.dev == b.dev && a.ino == b.ino && a.name == b.name;
}

// A PNG whose text chunks before its pixels name kPngSoftware as the software that wrote it.
bool png_written_here(const std::string& path) {
  std::string s;
  try {
    s = read_file_head(path, 1 << 16);
  } catch (const Error&) {
    return false;
  }
  if (s.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return false;
  for (size_t at = 8; at + 8 <= s.size();) {
    const auto byte = [&](size_t i) { return uint32_t(uint8_t(s[at + i])); };
    const size_t length = (byte(0) << 24) | (byte(1) << 16) | (byte(2) << 8) | byte(3);
    const std::string type = s.substr(at + 4, 4);
    if (type == "IDAT" || at + 12 + length > s.size()) return false;
    if (type == "tEXt" && s.compare(at + 8, length, std::string("Software") + '\0' + kPngSoftware) == 0) return true;
    at += 12 + length;
  }
  return false;
}

bool written_here(OutputKind kind, const std::string& path) {
  switch (kind) {
    case OutputKind::Safetensors:
      try {
        const SafeTensors st(path);
        const auto& meta = st.metadata();
        const auto by = meta.find(kWrittenByKey);
        return (by != meta.end() && by->second.rfind("vit ", 0) == 0) || meta.count("files");
      } catch (const Error&) {
        return false;
      }
    case OutputKind::Png:
      return png_written_here(path);
  }
  return false;
}

// What an existing file that is not this kind of output of ours is not, and what it may be instead.
const char* not_ours(OutputKind kind) {
  switch (kind) {
    case OutputKind::Safetensors: return "a safetensors file this engine wrote (a checkpoint, another program's file?)";
    case OutputKind::Png: return "a picture vit explain drew (a photo, another program's picture?)";
  }
  return "";
}

}  // namespace

void check_output_target(OutputKind kind, const std::string& flag, const std::string& path, const KeepFiles& keep,
                         bool force) {
  const std::string what = flag + " " + path;
  const Place out = place_of(path);
  for (const std::string& m : keep.model)
    if (same_place(out, place_of(m)))
      throw Error(what, "is a file loading the model reads (its weights, config or int8.safetensors); never "
                        "overwritten, even with --force");
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return;  // a new file
  if (!S_ISREG(st.st_mode)) throw Error(what, "exists and is not a regular file; not overwritten");
  if (force) return;
  for (const std::string& in : keep.inputs)
    if (same_place(out, place_of(in)))
      throw Error(what, "is one of the inputs; not overwritten (--force to overwrite it anyway)");
  if (written_here(kind, path)) return;
  if (kind == OutputKind::Safetensors) {
    try {
      const SafeTensors other(path);
    } catch (const Error&) {
      throw Error(what, "exists and is not a safetensors file; not overwritten (--force to overwrite it)");
    }
  }
  throw Error(what, std::string("exists and is not ") + not_ours(kind) + "; not overwritten (--force to overwrite it)");
}

void setup_logging(bool verbose) {
  // "warning: ..." as our own "error: ..." lines read; colour only on a terminal, and never with NO_COLOR.
  const bool color = ::isatty(STDERR_FILENO) && !std::getenv("NO_COLOR");
  std::shared_ptr<spdlog::logger> logger =
      color ? spdlog::stderr_color_mt("vit") : std::static_pointer_cast<spdlog::logger>(spdlog::stderr_logger_mt("vit"));
  logger->set_pattern(color ? "%^%l%$: %v" : "%l: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
}

}  // namespace vit::app
