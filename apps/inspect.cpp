// `vit inspect`: what the engine understood of a model file, without running it (the library's
// ModelInfo): architecture, tokens, parameters, preprocessing, FLOPs per image, storage dtype, the weights
// at a --precision and how each layer runs on this CPU, where each setting came from, and a CLIP or SigLIP
// checkpoint's text tower (TextInfo): its shape, tokenizer and context.
#include <string>
#include <utility>
#include <vector>

#include "apps/command.h"
#include "apps/options.h"
#include "vit/cpu.h"
#include "vit/text.h"
#include "vit/vit.h"

namespace vit::app {
namespace {

// What this CPU runs natively, as oneDNN sees it: "oneDNN runs it as avx2: f32, int8 (...); bf16 ...".
std::string precision_support() {
  const CpuIsa isa = cpu_isa();
  std::string s = "oneDNN runs it as " + isa.name + ": f32, int8 (" +
                  (isa.vnni ? std::string("VNNI, 8-bit weights") : std::string("no VNNI: 7-bit weights")) + ")";
  return s + (isa.bf16 ? ", bf16" : "; bf16 needs avx512_bf16 or AMX");
}

// The line `--image` adds: the image's size, what it is resized to, and its grid of patches.
std::string image_line(const std::string& path, const ImageInput& in) {
  std::string s = std::to_string(in.width) + "x" + std::to_string(in.height) + " (" + path + "): ";
  if (in.max_patches)
    return s + "resized to " + std::to_string(in.input_width) + "x" + std::to_string(in.input_height) +
           " at its own aspect ratio, a grid of " + std::to_string(in.grid_rows) + "x" + std::to_string(in.grid_cols) +
           " = " + std::to_string(in.grid_rows * in.grid_cols) + " patches within the budget of " +
           std::to_string(in.max_patches) + " (" + std::to_string(in.tokens) + " tokens)";
  return s + "resized and cropped to " + std::to_string(in.input_width) + "x" + std::to_string(in.input_height) +
         ", a grid of " + std::to_string(in.grid_rows) + "x" + std::to_string(in.grid_cols) + " patches (" +
         std::to_string(in.tokens) + " tokens), as every image";
}

// The text tower's lines: its shape, its tokenizer and context, how it scores; or why it cannot run.
std::vector<std::pair<std::string, std::string>> text_lines(const ModelOptions& o) {
  const std::string path = model_path(o);
  if (!has_text_tower(path)) return {{"text tower", "none (an image tower alone)"}};
  try {
    TextOptions to;
    to.precision = o.precision;
    const TextInfo t = TextModel(path, to).info();
    std::string scores = std::to_string(t.logit_scale) + " * cosine";
    if (t.logit_bias) scores += " + " + std::to_string(*t.logit_bias) + ", each class's sigmoid";
    else scores += ", softmax over the classes";
    return {{"text tower", t.summary},
            {"tokenizer", t.tokenizer + " (" + t.tokenizer_file + "), context " + std::to_string(t.context) + " tokens"},
            {"text scores", scores}};
  } catch (const Error& e) {
    return {{"text tower", std::string("cannot be run: ") + e.what()}};
  }
}

int print_inspect(const ModelInfo& info, const std::string& image,
                  const std::vector<std::pair<std::string, std::string>>& text) {
  for (const auto& [topic, text] : info.description) std::printf("%-14s %s\n", topic.c_str(), text.c_str());
  if (!image.empty()) std::printf("%-14s %s\n", "image", image.c_str());
  for (const auto& [topic, line] : text) std::printf("%-14s %s\n", topic.c_str(), line.c_str());
  std::printf("FLOPs/image    %.3g G (multiply-add = 2)\n", info.flops / 1e9);
  std::printf("precision      %s, weights %.1f MB resident\n", info.precision.c_str(), double(info.weight_bytes) / 1e6);
  if (!info.int8_weights.empty())
    std::printf("int8 weights   %s: rounded by vit quantize (GPTQ)%s\n", info.int8_weights.c_str(),
                info.precision == precision_name(Precision::Int8) ? ", used" : ", used at --precision int8");
  std::printf("this CPU       %s\n", precision_support().c_str());
  std::printf("linear layers  how each runs on this CPU (oneDNN form; int8: path)\n");
  for (const ModelInfo::Layer& l : info.layers)
    std::printf("  %-26s %s, %s\n", l.name.c_str(), l.precision.c_str(), l.how.c_str());
  std::printf("attention core %s\n", info.attention.c_str());
  std::printf("attention maps at %s (vit serve's /v1/explain: the served precision; vit explain: f32)\n",
              info.precision.c_str());
  std::printf("where each setting came from:\n");
  for (const auto& [what, from] : info.origins) std::printf("  %-14s %s\n", what.c_str(), from.c_str());
  return kExitOk;
}

}  // namespace

void add_inspect_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<ModelOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "print what the engine understood of a model file");
  CLI::Option* positional =
      cmd->add_option("MODEL", o->model, "a .safetensors file or the folder holding it (default: the DeiT-Tiny folder)");
  // -m as every other command takes it, or the bare path; not both.
  positional->excludes(cmd->add_option("-m,--model", o->model, "the same, as the other commands take it"));
  // What decides the model's shape and weights (--precision: the weights as it keeps them, and their size).
  for (const char* name : {"config", "arch", "img_size", "max_patches", "precision"}) add_load_option(cmd, o.get(), name);
  auto image = std::make_shared<std::string>();
  cmd->add_option("--image", *image, "an image file: print the grid of patches it gets (a NaFlex model's own, "
                                     "within --max-patches)");
  cmd->callback([o, image, prepare] {
    *prepare = [o, image]() -> std::function<int()> {
      const Classifier model(model_path(*o), classifier_options(*o));
      const std::string line = image->empty() ? "" : image_line(*image, model.image_input(*image));
      return [info = model.info(), line, text = text_lines(*o)] { return print_inspect(info, line, text); };
    };
  });
}

}  // namespace vit::app
