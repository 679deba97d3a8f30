// The `vit` command: `vit classify`, `vit embed`, `vit explain`, `vit eval`, `vit bench`, `vit inspect`, `vit quantize` and
// `vit serve`. Each subcommand first prepares (flags, model, outputs: anything wrong there is exit 2), then works;
// errors become one "error: ..." line on stderr and the exit status of the table in common.h.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "apps/command.h"
#include "apps/options.h"
#include "apps/output.h"
#include "vit/error.h"

namespace vit::app {
void add_classify_command(CLI::App& app, Prepare* prepare);
void add_explain_command(CLI::App& app, Prepare* prepare);
void add_eval_command(CLI::App& app, Prepare* prepare);
void add_bench_command(CLI::App& app, Prepare* prepare);
void add_inspect_command(CLI::App& app, Prepare* prepare);
void add_embed_command(CLI::App& app, Prepare* prepare);
void add_serve_command(CLI::App& app, Prepare* prepare);
void add_quantize_command(CLI::App& app, Prepare* prepare);

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The subcommand named on the command line ("" if none), and whether it is one of ours.
std::string named_command(int argc, char** argv, const CLI::App& app, bool* known) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.empty() || a[0] == '-') continue;
    *known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == a) *known = true;
    return a;
  }
  *known = false;
  return "";
}

int unknown_command(const std::string& name, const CLI::App& app) {
  std::string best;
  size_t best_d = 3;  // suggest only near misses
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    const size_t d = edit_distance(name, sub->get_name());
    if (d < best_d) best_d = d, best = sub->get_name();
  }
  std::fprintf(stderr, "error: '%s' is not a vit command%s\nrun 'vit --help' for the commands\n", name.c_str(),
               best.empty() ? "" : ("; did you mean '" + best + "'?").c_str());
  return kExitUsage;
}

}  // namespace
}  // namespace vit::app

// `vit serve` runs every pass on one compute thread, so libgomp's barriers spin (one OpenMP team, as in
// `vit embed`); on a machine whose cores other processes share, a barrier spinning while its partner thread is
// preempted waits out whole time slices. libgomp reads its spin bound only from the environment at start-up,
// so the server starts itself again with GOMP_SPINCOUNT=1000 (libgomp's own bound for oversubscribed
// processes) unless the user set the wait policy. Quiet, that costs nothing measurable; shared, the server
// keeps its speed (docs/PERFORMANCE.md).
void bound_spinning(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;
  setenv("GOMP_SPINCOUNT", "1000", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then serve with libgomp's defaults
  unsetenv("GOMP_SPINCOUNT");
}

int main(int argc, char** argv) {
  using namespace vit::app;
  // `vit help [COMMAND]` is `vit [COMMAND] --help`, as git, cargo and docker take it.
  std::vector<char*> args(argv, argv + argc);
  static char help_flag[] = "--help";
  if (argc >= 2 && std::string(argv[1]) == "help") {
    args.erase(args.begin() + 1);
    args.push_back(help_flag);
    argc = int(args.size());
    argv = args.data();
  }
  CLI::App app{"vit: Vision Transformer image classification on the CPU (oneDNN)"};
  app.require_subcommand(1);
  app.fallthrough();  // -v works after the subcommand too
  app.set_version_flag("--version", "vit " VIT_VERSION);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging on stderr");
  app.footer("Exit status: 0 all done; 1 some inputs failed (the rest done); 2 bad usage, an unusable model or an "
             "output that cannot be created; 3 writing an output failed part way; 4 the run failed (out of memory, "
             "an engine error).");
  Prepare prepare;
  add_classify_command(app, &prepare);
  add_explain_command(app, &prepare);
  add_eval_command(app, &prepare);
  add_bench_command(app, &prepare);
  add_inspect_command(app, &prepare);
  add_embed_command(app, &prepare);
  add_serve_command(app, &prepare);
  add_quantize_command(app, &prepare);
  bool known = false;
  const std::string command = named_command(argc, argv, app, &known);
  if (!command.empty() && !known) return unknown_command(command, app);
  if (command == "serve") bound_spinning(argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fprintf(stderr, "run 'vit %s--help' for usage\n", command.empty() ? "" : (command + " ").c_str());
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
  install_signal_handlers();
  try {
    const int status = work();
    check_stdout();
    return status;
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
