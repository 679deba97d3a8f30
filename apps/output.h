// What the commands write, made safe: stdout checked at every flush (a failed write is exit 3 with a
// message; a closed pipe ends the process quietly, as it ends cat), interrupted runs leave no partial
// output file behind, and file names written losslessly in JSON lines.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vit::app {

// SIGINT, SIGTERM, SIGHUP, SIGPIPE: remove unfinished output files, then end as the signal would.
void install_signal_handlers();

// Flushes stdout; throws vit::WriteError if a write to it failed (a full disk, an I/O error); a closed
// pipe (EPIPE) ends the process quietly, like SIGPIPE.
void check_stdout();

// The output a command is about to write must not be one of its inputs, nor (unless force) an existing
// file that is not a safetensors file: throws vit::Error saying which.
void check_output_target(const std::string& flag, const std::string& path, const std::vector<std::string>& inputs,
                         bool force);

// spdlog's lines on stderr read "warning: ..." as our own "error: ..." lines do; debug lines with -v.
void setup_logging(bool verbose);

// {"file": NAME, ...rest}: NAME as json_string writes it (any bytes), rest's fields after it.
std::string json_line(const std::string& file, const nlohmann::json& rest);

}  // namespace vit::app
