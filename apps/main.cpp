// The `vit` command: `vit classify`, `vit eval`, `vit bench` and `vit inspect`. Each subcommand first prepares (flags,
// model, outputs: anything wrong there is exit 2), then works; errors become one "error: ..." line on
// stderr and the exit status of the table in common.h.
#include <spdlog/spdlog.h>

#include <new>

#include "common.h"
#include "vit/error.h"

namespace vit::app {
void add_classify_command(CLI::App& app, Prepare* prepare);
void add_eval_command(CLI::App& app, Prepare* prepare);
void add_bench_command(CLI::App& app, Prepare* prepare);
void add_inspect_command(CLI::App& app, Prepare* prepare);
}  // namespace vit::app

int main(int argc, char** argv) {
  using namespace vit::app;
  CLI::App app{"vit: Vision Transformer image classification on the CPU (oneDNN)"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging on stderr");
  Prepare prepare;
  add_classify_command(app, &prepare);
  add_eval_command(app, &prepare);
  add_bench_command(app, &prepare);
  add_inspect_command(app, &prepare);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fprintf(stderr, "run '%s --help' for usage\n", argv[0]);
    return kExitUsage;
  }
  setup_logging(verbose);
  spdlog::debug("started");
  std::function<int()> work;
  try {
    work = prepare();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitUsage;
  }
  try {
    return work();
  } catch (const vit::WriteError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitWriteFailed;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return kExitFailed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitFailed;
  }
}
