// A text tower from the command line, until the library and `vit embed --text` call it: each text's tokens (as the
// checkpoint's reference tokenizer makes them) and its embedding, one JSON line per text.
//   text_embed MODEL [--precision f32|bf16|int8] [--tokenizer DIR] TEXT...
#include <CLI/CLI.hpp>

#include <cstdio>

#include "engine/io/text.h"
#include "models/text_tower.h"
#include "vit/error.h"

int main(int argc, char** argv) {
  CLI::App app("Embeds texts with a CLIP or SigLIP checkpoint's text tower: one JSON line per text");
  std::string model, precision = "f32", tokenizer;
  std::vector<std::string> texts;
  app.add_option("model", model, "the model folder (OpenCLIP, Hugging Face CLIPModel or SiglipModel)")->required();
  app.add_option("texts", texts, "the texts")->required();
  app.add_option("--precision", precision, "f32, bf16 or int8");
  app.add_option("--tokenizer", tokenizer, "the tokenizer's folder, when not the model's");
  CLI11_PARSE(app, argc, argv);
  try {
    vit::TextTower tower = vit::TextTower::load(model, vit::precision_from_name(precision), tokenizer);
    std::fprintf(stderr, "%s\n", tower.config().summary().c_str());
    const std::vector<vit::Tokens> tokens = tower.tokenize(texts);
    const std::vector<float> e = tower.embed(tokens);
    const int64_t E = tower.embedding_size();
    for (size_t i = 0; i < texts.size(); ++i) {
      std::string line = "{\"text\": " + vit::json_string(texts[i]) + ", \"tokens\": [";
      for (int64_t t = 0; t < tokens[i].length; ++t) line += (t ? ", " : "") + std::to_string(tokens[i].ids[size_t(t)]);
      line += std::string("], \"truncated\": ") + (tokens[i].truncated ? "true" : "false") + ", \"embedding\": [";
      for (int64_t d = 0; d < E; ++d) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.9g", d ? ", " : "", double(e[i * size_t(E) + size_t(d)]));
        line += buf;
      }
      std::printf("%s]}\n", line.c_str());
    }
  } catch (const vit::Error& err) {
    std::fprintf(stderr, "error: %s\n", err.what());
    return 2;
  }
  return 0;
}
