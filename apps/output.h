// What the commands write, made safe: stdout checked at every flush (a failed write is exit 3 with a
// message; a closed pipe ends the process quietly, as it ends cat), interrupted runs leave no partial
// output file behind, no output replaces the model, an input or a file the engine did not write, and
// file names are written losslessly in JSON lines.
#pragma once
#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>

namespace vit::app {

// SIGINT, SIGTERM, SIGHUP, SIGPIPE: remove unfinished output files, then end as the signal would.
void install_signal_handlers();

// Flushes stdout; throws vit::WriteError if a write to it failed (a full disk, an I/O error); a closed
// pipe (EPIPE) ends the process quietly, like SIGPIPE.
void check_stdout();

// The kinds of file the commands write. Each carries a mark by which a later run knows it for one this
// engine wrote, and may replace it: safetensors metadata "written_by": "vit COMMAND" (files written
// before that mark existed: their "files" list), a PNG naming kPngSoftware in its "Software" text chunk.
enum class OutputKind { Safetensors, Png };
inline constexpr const char* kWrittenByKey = "written_by";
inline constexpr const char* kPngSoftware = "vit explain";
// The metadata a command's safetensors output carries: {"written_by": "vit COMMAND"} and `rest`.
std::map<std::string, std::string> output_metadata(const std::string& command, std::map<std::string, std::string> rest);

// What a command's outputs must not replace: the files loading its model reads or would read
// (ModelFiles::read_paths: never, even with --force) and its inputs (unless --force).
struct KeepFiles {
  std::vector<std::string> model;
  std::vector<std::string> inputs;
};

// Checked before any work, for each file a command is about to write: it must not be a file the model
// is loaded from, nor one of the inputs, nor (unless force) an existing file this engine did not write
// as this kind of output; an existing path that is not a regular file is never replaced. Throws
// vit::Error "FLAG PATH: why".
void check_output_target(OutputKind kind, const std::string& flag, const std::string& path, const KeepFiles& keep,
                         bool force);

// spdlog's lines on stderr read "warning: ..." as our own "error: ..." lines do; debug lines with -v.
void setup_logging(bool verbose);

// {"file": NAME, ...rest}: NAME as json_string writes it (any bytes), rest's fields after it.
std::string json_line(const std::string& file, const nlohmann::json& rest);

}  // namespace vit::app
