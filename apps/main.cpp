// The `vit` command: `vit classify`, `vit bench` and `vit inspect`. The only place errors are caught: each becomes
// one "error: ..." line on stderr and an exit code (2: bad usage, paths or model; 1: some images failed).
#include <spdlog/spdlog.h>

#include "common.h"
#include "engine/error.h"

namespace vit::app {
void add_classify_command(CLI::App& app, std::function<int()>* run);
void add_bench_command(CLI::App& app, std::function<int()>* run);
void add_inspect_command(CLI::App& app, std::function<int()>* run);
}  // namespace vit::app

int main(int argc, char** argv) {
  using namespace vit::app;
  CLI::App app{"vit: Vision Transformer image classification on the CPU (oneDNN)"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging on stderr");
  std::function<int()> run;
  add_classify_command(app, &run);
  add_bench_command(app, &run);
  add_inspect_command(app, &run);
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
  try {
    return run();
  } catch (const vit::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitUsage;
  } catch (const dnnl::error& e) {
    std::fprintf(stderr, "error: oneDNN: %s\n", e.what());
    return kExitSomeFailed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitSomeFailed;
  }
}
