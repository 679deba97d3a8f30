// What the commands write, made safe: stdout checked at every flush (a failed write is exit 3 with a
// message; a closed pipe ends the process quietly, as it ends cat), interrupted runs leave no partial
// output file behind, and file names written losslessly in JSON lines.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace vit::app {

// SIGINT, SIGTERM, SIGHUP, SIGPIPE: remove unfinished output files, then end as the signal would.
void install_signal_handlers();

// Flushes stdout; throws vit::WriteError if a write to it failed (a full disk, an I/O error); a closed
// pipe (EPIPE) ends the process quietly, like SIGPIPE.
void check_stdout();

// {"file": NAME, ...rest}: NAME as json_string writes it (any bytes), rest's fields after it.
std::string json_line(const std::string& file, const nlohmann::json& rest);

}  // namespace vit::app
