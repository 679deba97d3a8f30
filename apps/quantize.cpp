// `vit quantize -m MODEL --calib DIR -o OUT_DIR`: an int8 model folder whose block weights are rounded
// from calibration images (GPTQ) instead of to nearest at load; `--model OUT_DIR --precision int8` runs it.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <memory>

#include "apps/command.h"
#include "apps/options.h"
#include "engine/io/text.h"
#include "vit/quantize.h"

namespace vit::app {

void add_quantize_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<QuantizeOptions>();
  auto load = std::make_shared<LoadOptions>();  // the model-wide flags quantize takes
  CLI::App* cmd = app.add_subcommand(
      "quantize", "write an int8 model folder, its weights rounded with GPTQ from calibration images");
  cmd->add_option("-m,--model", o->model, "the f32 model: a .safetensors file or its folder")->required();
  for (const char* name : {"config", "arch", "threads"}) add_load_option(cmd, load.get(), name);
  cmd->add_option("--calib", o->calib, "calibration images: files or folders (a few hundred photos like the ones "
                                       "the model will see)")
      ->required();
  add_name_option(cmd, "-o,--output", &o->out, "the folder to write (must not exist, or be empty)")->required();
  add_number_option(cmd, "--images", &o->max_images, int64_t(1), int64_t(1) << 20,
                    "calibration images used at most (the first in name order)");
  cmd->callback([o, load, prepare] {
    *prepare = [o, load]() -> std::function<int()> {
      o->config = load->config;
      o->arch = load->arch;
      set_threads(usable_threads(load->threads));
      auto q = std::make_shared<Quantizer>(*o);
      return [o, q] {
        // Minutes for a large model: each stage on the terminal (and in -v's log).
        const bool terminal = ::isatty(2);
        const QuantizeResult r = q->run([terminal](const std::string& s) {
          if (terminal) std::fprintf(stderr, "\r%-60s", s.c_str());
          spdlog::debug("{}", s);
        });
        if (terminal) std::fprintf(stderr, "\r%-60s\r", "");
        for (const auto& [file, why] : r.failed)
          std::fprintf(stderr, "error: %s: %s (not used)\n", printable(file).c_str(), printable(why).c_str());
        if (r.images == 0) {
          std::fprintf(stderr, "error: none of the %zu calibration images could be read; nothing written\n",
                       r.failed.size());
          return kExitSomeFailed;
        }
        double worst = 0.0, sum = 0.0;
        for (const auto& g : r.gain) worst = std::max(worst, g.second), sum += g.second;
        std::printf("%s: %lld layers rounded on both int8 grids from %lld calibration images; output change "
                    "against rounding to nearest %.2fx on average (worst layer %.2fx)\n"
                    "run it with: --model %s --precision int8\n",
                    o->out.c_str(), (long long)r.layers, (long long)r.images,
                    r.gain.empty() ? 1.0 : sum / double(r.gain.size()), worst, q->model_path().c_str());
        return r.failed.empty() ? kExitOk : kExitSomeFailed;
      };
    };
  });
}

}  // namespace vit::app
