// See output.h.
#include "apps/output.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
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

void check_output_target(const std::string& flag, const std::string& path, const std::vector<std::string>& inputs,
                         bool force) {
  struct stat out{};
  if (::stat(path.c_str(), &out) != 0) return;  // a new file
  if (!S_ISREG(out.st_mode)) throw Error(flag + " " + path, "exists and is not a regular file; not overwritten");
  if (force) return;
  for (const std::string& in : inputs) {
    struct stat st{};
    if (::stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino)
      throw Error(flag + " " + path, "is one of the inputs; not overwritten (--force to overwrite it anyway)");
  }
  try {
    SafeTensors existing(path);
  } catch (const Error&) {
    throw Error(flag + " " + path, "exists and is not a safetensors file; not overwritten (--force to overwrite it)");
  }
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
