// See output.h.
#include "output.h"

#include <csignal>
#include <cstdio>
#include <cstring>

#include "engine/io/files.h"
#include "engine/io/text.h"
#include "vit/error.h"

namespace vit::app {
namespace {

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

}  // namespace vit::app
