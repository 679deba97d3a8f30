// vit::TextModel (vit/text.h): a checkpoint's text tower (models/text_tower.h) behind standard types; the texts a
// tokenizer refuses get their errors and the others run, a batch at a time; open_clip's zero-shot class embeddings;
// the zero-shot labels file `vit classify --text-embeddings` reads.
#include "vit/text.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "engine/io/safetensors.h"
#include "engine/io/text.h"
#include "models/layouts.h"
#include "models/text_tower.h"
#include "vit/model_files.h"
#include "vit/limits.h"
#include "vit/threads.h"
#include "vit/topk.h"
#include "zero_shot.h"

namespace vit {

const std::vector<std::string>& prompt_templates(PromptTemplates t) {
  // open_clip/zero_shot_metadata.py, each lambda's f-string with "{}" for its class name.
  static const std::vector<std::string> imagenet = {
      "a bad photo of a {}.",
      "a photo of many {}.",
      "a sculpture of a {}.",
      "a photo of the hard to see {}.",
      "a low resolution photo of the {}.",
      "a rendering of a {}.",
      "graffiti of a {}.",
      "a bad photo of the {}.",
      "a cropped photo of the {}.",
      "a tattoo of a {}.",
      "the embroidered {}.",
      "a photo of a hard to see {}.",
      "a bright photo of a {}.",
      "a photo of a clean {}.",
      "a photo of a dirty {}.",
      "a dark photo of the {}.",
      "a drawing of a {}.",
      "a photo of my {}.",
      "the plastic {}.",
      "a photo of the cool {}.",
      "a close-up photo of a {}.",
      "a black and white photo of the {}.",
      "a painting of the {}.",
      "a painting of a {}.",
      "a pixelated photo of the {}.",
      "a sculpture of the {}.",
      "a bright photo of the {}.",
      "a cropped photo of a {}.",
      "a plastic {}.",
      "a photo of the dirty {}.",
      "a jpeg corrupted photo of a {}.",
      "a blurry photo of the {}.",
      "a photo of the {}.",
      "a good photo of the {}.",
      "a rendering of the {}.",
      "a {} in a video game.",
      "a photo of one {}.",
      "a doodle of a {}.",
      "a close-up photo of the {}.",
      "a photo of a {}.",
      "the origami {}.",
      "the {} in a video game.",
      "a sketch of a {}.",
      "a doodle of the {}.",
      "a origami {}.",
      "a low resolution photo of a {}.",
      "the toy {}.",
      "a rendition of the {}.",
      "a photo of the clean {}.",
      "a photo of a large {}.",
      "a rendition of a {}.",
      "a photo of a nice {}.",
      "a photo of a weird {}.",
      "a blurry photo of a {}.",
      "a cartoon {}.",
      "art of a {}.",
      "a sketch of the {}.",
      "a embroidered {}.",
      "a pixelated photo of a {}.",
      "itap of the {}.",
      "a jpeg corrupted photo of the {}.",
      "a good photo of a {}.",
      "a plushie {}.",
      "a photo of the nice {}.",
      "a photo of the small {}.",
      "a photo of the weird {}.",
      "the cartoon {}.",
      "art of the {}.",
      "a drawing of the {}.",
      "a photo of the large {}.",
      "a black and white photo of a {}.",
      "the plushie {}.",
      "a dark photo of a {}.",
      "itap of a {}.",
      "graffiti of the {}.",
      "a toy {}.",
      "itap of my {}.",
      "a photo of a cool {}.",
      "a photo of a small {}.",
      "a tattoo of the {}.",
  };
  static const std::vector<std::string> simple = {
      "itap of a {}.",
      "a bad photo of the {}.",
      "a origami {}.",
      "a photo of the large {}.",
      "a {} in a video game.",
      "art of the {}.",
      "a photo of the small {}.",
  };
  return t == PromptTemplates::ImageNet ? imagenet : simple;
}

namespace {

// torch.nn.functional.normalize: x / max(||x||, 1e-12).
void unit_length(float* x, int64_t n) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const double inv = 1.0 / std::max(std::sqrt(ss), 1e-12);
  for (int64_t i = 0; i < n; ++i) x[i] = float(x[i] * inv);
}

// What no tokenizer is asked: a text with nothing in it, or with a NUL byte (never in text a person wrote: a binary
// file read as text, or a C string cut short).
std::string refuse(const std::string& text) {
  if (text.empty()) return "empty: a text needs at least one character";
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) return "holds a NUL byte (at byte " + std::to_string(nul) + ")";
  return "";
}

}  // namespace

struct TextModel::Impl {
  TextTower tower;
  TextOptions options;
  TextInfo info;
  int threads = 0;
  std::mutex mutex;  // the tower's Plans, kept between calls

  Impl(TextTower t, const TextOptions& o) : tower(std::move(t)), options(o) {
    const TextConfig& c = tower.config();
    info.tower = c.family;
    info.tokenizer = tokenizer_kind_name(c.tokenizer.kind);
    info.tokenizer_file = c.tokenizer.model;
    info.summary = c.summary();
    info.context = c.context;
    info.embedding = c.embed;
    info.logit_scale = tower.logit_scale();
    info.logit_bias = tower.logit_bias();
  }

  // Each text's tokens, or its error.
  std::vector<Tokens> tokenize(const std::vector<std::string>& texts, std::vector<std::string>* errors) const {
    std::vector<Tokens> out(texts.size());
    errors->assign(texts.size(), "");
    for (size_t i = 0; i < texts.size(); ++i) {
      (*errors)[i] = refuse(texts[i]);
      if (!(*errors)[i].empty()) continue;
      try {
        out[i] = tower.tokenizer().encode(texts[i]);
      } catch (const Error& e) {
        (*errors)[i] = e.what();
      }
    }
    return out;
  }
};

TextModel::TextModel(const std::string& model, const TextOptions& options) {
  check_batch_size(options.batch);
  if (options.threads < 0) throw ArgumentError("threads must be 0 (all cores) or more, got " + std::to_string(options.threads));
  const int threads = options.threads > 0 ? usable_threads(options.threads) : max_threads();
  set_threads(threads);
  impl_ = std::make_unique<Impl>(TextTower::load(model, options.precision, options.tokenizer), options);
  impl_->threads = threads;
}

TextModel::~TextModel() = default;
TextModel::TextModel(TextModel&&) noexcept = default;
TextModel& TextModel::operator=(TextModel&&) noexcept = default;

const TextInfo& TextModel::info() const { return impl_->info; }

std::vector<TextTokens> TextModel::tokens(const std::vector<std::string>& texts) const {
  std::vector<std::string> errors;
  const std::vector<Tokens> tokens = impl_->tokenize(texts, &errors);
  std::vector<TextTokens> out(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    out[i].error = errors[i];
    if (!errors[i].empty()) continue;
    out[i].ids.assign(tokens[i].ids.begin(), tokens[i].ids.begin() + tokens[i].length);
    out[i].truncated = tokens[i].truncated;
  }
  return out;
}

std::vector<TextEmbedding> TextModel::embed(const std::vector<std::string>& texts, bool normalize) const {
  std::vector<std::string> errors;
  const std::vector<Tokens> tokens = impl_->tokenize(texts, &errors);
  std::vector<TextEmbedding> out(texts.size());
  std::vector<size_t> good;
  for (size_t i = 0; i < texts.size(); ++i) {
    out[i].error = errors[i];
    if (errors[i].empty()) good.push_back(i);
  }
  const int64_t E = impl_->info.embedding;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  set_threads(impl_->threads);
  for (size_t first = 0; first < good.size(); first += size_t(impl_->options.batch)) {
    const size_t n = std::min(good.size() - first, size_t(impl_->options.batch));
    std::vector<Tokens> batch;
    for (size_t j = 0; j < n; ++j) batch.push_back(tokens[good[first + j]]);
    const std::vector<float> rows = impl_->tower.embed(batch);
    for (size_t j = 0; j < n; ++j) {
      TextEmbedding& e = out[good[first + j]];
      e.embedding.assign(rows.begin() + long(j) * E, rows.begin() + long(j + 1) * E);
      if (normalize) unit_length(e.embedding.data(), E);
      e.tokens = batch[j].length;
      e.truncated = batch[j].truncated;
    }
  }
  return out;
}

std::vector<float> TextModel::class_embeddings(const std::vector<std::string>& names, PromptTemplates templates) const {
  const std::vector<std::string>& prompts = prompt_templates(templates);
  const int64_t E = impl_->info.embedding;
  std::vector<float> out(names.size() * size_t(E));
  for (size_t c = 0; c < names.size(); ++c) {
    std::vector<std::string> texts;
    for (const std::string& p : prompts) {
      std::string t = p;
      t.replace(t.find("{}"), 2, names[c]);
      texts.push_back(std::move(t));
    }
    const std::string why = refuse(names[c]);
    if (!why.empty()) throw ArgumentError("class " + std::to_string(c + 1), why);
    // class_embeddings = model.encode_text(texts, normalize=True).mean(dim=0); then / its norm
    const std::vector<TextEmbedding> rows = embed(texts, true);
    std::vector<double> mean(size_t(E), 0.0);
    for (const TextEmbedding& r : rows) {
      if (!r.error.empty()) throw ArgumentError("class " + std::to_string(c + 1) + " '" + names[c] + "'", r.error);
      for (int64_t e = 0; e < E; ++e) mean[size_t(e)] += r.embedding[size_t(e)];
    }
    float* row = out.data() + c * size_t(E);
    for (int64_t e = 0; e < E; ++e) row[e] = float(mean[size_t(e)] / double(rows.size()));
    unit_length(row, E);
  }
  return out;
}

bool has_text_tower(const std::string& model) {
  const ModelFiles files = find_model_files(model);
  const SafeTensors st(files.weights);
  std::string prefix;
  return text_tower_prefix(detect_layout(st, files.weights), st, &prefix);
}

std::vector<std::vector<std::pair<int, float>>> zero_shot_top(const ClassEmbeddings& classes,
                                                              const std::vector<const float*>& images, int k) {
  const ZeroShot z(classes, classes.width, "the class embeddings");  // checked and made unit rows once
  std::vector<float> scores(size_t(z.classes()));
  std::vector<std::vector<std::pair<int, float>>> out(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    if (!images[i]) continue;
    z.score(images[i], scores.data());
    for (const Scored& s : z.top(scores.data(), k)) out[i].emplace_back(s.index, s.prob);
  }
  return out;
}

ClassEmbeddings TextModel::zero_shot_classes(const std::vector<std::string>& names, PromptTemplates templates) const {
  const TextInfo& info = impl_->info;
  if (!std::isfinite(info.logit_scale))
    throw Error(info.tower + " text tower", "the model holds no logit_scale: its zero-shot scores cannot be made as its own are");
  ClassEmbeddings out;
  out.rows = class_embeddings(names, templates);
  out.labels = names;
  out.width = info.embedding;
  out.logit_scale = info.logit_scale;
  out.logit_bias = info.logit_bias.value_or(0.f);
  out.activation = info.logit_bias ? ZeroShotActivation::Sigmoid : ZeroShotActivation::Softmax;
  return out;
}

}  // namespace vit
