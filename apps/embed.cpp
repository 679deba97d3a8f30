// `vit embed`: one embedding per image, as timm computes it: forward_head(forward_features(x),
// pre_logits=True) by default, model(x) with --head, the token sequence too with --tokens; one per video,
// the mean over the frames `vit classify` would sample; with --text or --text-file, one per text from a CLIP or
// SigLIP model's text tower (open_clip's encode_text). JSON lines on stdout, or a safetensors file
// written as --save-logits writes its file (atomically, files or texts listed).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "apps/command.h"
#include "apps/inputs.h"
#include "apps/options.h"
#include "apps/output.h"
#include "apps/texts.h"
#include "engine/io/safetensors.h"
#include "engine/io/text.h"
#include "vit/limits.h"
#include "vit/text.h"
#include "vit/vit.h"

namespace vit::app {
namespace {

struct EmbedCommand {
  ModelOptions model;
  EmbedOptions embed;
  std::string out;
  int batch = 8;
  int64_t max_pixels = kDefaultMaxPixels;
  bool force = false, stdin_paths = false, null_separated = false, exif_transpose = false, videos = false, stats = false;
  std::vector<std::string> paths;
  std::vector<std::string> texts;  // --text
  std::string text_file;           // --text-file
};

// Where embeddings go: JSON lines on stdout, or the -o file (embeddings [N, E], tokens [N, T, D], the
// files in order in its metadata); errors as `vit classify` prints them.
// With --tokens, what a token sequence holds: its prefix tokens (class, distillation, register tokens)
// first, then one token per patch, row by row of the patch grid.
class EmbedOutput {
 public:
  EmbedOutput(const EmbedCommand& o, const Classifier& c) {
    if (o.embed.tokens) {
      const ModelInfo info = c.info();
      grid_ = {info.input_height / info.patch, info.input_width / info.patch};
      prefix_tokens_ = c.tokens() - grid_[0] * grid_[1];
    }
    if (o.out.empty()) return;
    RowWriter::RowShapes shapes{{"embeddings", {c.embedding_size(o.embed)}}};
    if (o.embed.tokens) shapes.push_back({"tokens", {c.tokens(), c.width()}});
    saved_ = std::make_unique<RowWriter>(o.out, shapes);
  }
  void error(const std::string& file, const std::string& why) {
    ++failed_;
    if (saved_) std::fprintf(stderr, "error: %s: %s\n", printable(file).c_str(), printable(why).c_str());
    else std::printf("%s\n", json_line(file, {{"error", why}}).c_str());
  }
  void result(const Embedding& e) {
    if (!e.error.empty()) return error(e.file, e.error);
    ++done_;
    if (saved_) {
      saved_->add(e.tokens.empty() ? std::vector<const float*>{e.embedding.data()}
                                   : std::vector<const float*>{e.embedding.data(), e.tokens.data()});
      files_ += (files_.size() > 1 ? "," : "") + json_string(e.file);
      return;
    }
    nlohmann::json rest = {{"embedding", e.embedding}};
    if (!e.tokens.empty()) {
      rest["prefix_tokens"] = prefix_tokens_;
      rest["patch_grid"] = grid_;
      rest["tokens"] = e.tokens;
    }
    std::printf("%s\n", json_line(e.file, rest).c_str());
  }
  void finish() {
    if (!saved_) return;
    std::map<std::string, std::string> meta{{"files", files_ + "]"}};
    if (!grid_.empty()) {
      meta["prefix_tokens"] = std::to_string(prefix_tokens_);
      meta["patch_grid"] = nlohmann::json(grid_).dump();
    }
    saved_->finish(output_metadata("embed", meta));
  }
  size_t done() const { return done_; }
  size_t failed() const { return failed_; }

 private:
  std::unique_ptr<RowWriter> saved_;
  std::vector<int64_t> grid_;  // with --tokens: the patch grid, [rows, columns]
  int64_t prefix_tokens_ = 0;
  std::string files_ = "[";
  size_t done_ = 0, failed_ = 0;
};

int embed_all(const EmbedCommand& o, std::vector<Input>& inputs, const Classifier& c, EmbedOutput& out) {
  std::unique_ptr<PathStream> stream;
  if (o.stdin_paths) stream = std::make_unique<PathStream>(STDIN_FILENO, o.null_separated ? '\0' : '\n');
  size_t seen = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t first = 0;; first += size_t(o.batch)) {
    std::vector<Input> batch;
    if (stream) {
      if (!stream->next(size_t(o.batch), &batch)) break;
    } else {
      if (first >= inputs.size()) break;
      batch.assign(inputs.begin() + long(first), inputs.begin() + long(std::min(first + size_t(o.batch), inputs.size())));
    }
    std::vector<std::string> paths;
    for (const Input& in : batch)
      if (in.error.empty()) paths.push_back(in.file);
    const std::vector<Embedding> results = c.embed(paths, o.embed);
    size_t next = 0;
    for (const Input& in : batch) {
      if (!in.error.empty()) out.error(in.file, in.error);
      else out.result(results[next++]);
    }
    check_stdout();
    seen += batch.size();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.stats)
    std::fprintf(stderr, "embedded %zu of %zu inputs in %.3f s: %.1f img/s end to end (decode, preprocessing and "
                 "inference; batch %d, %d threads)\n", out.done(), seen, secs, secs > 0 ? double(out.done()) / secs : 0.0,
                 o.batch, set_threads(0));
  if (out.failed() && seen > 1) std::fprintf(stderr, "%zu of %zu inputs embedded, %zu failed\n", out.done(), seen, out.failed());
  out.finish();
  return out.failed() ? kExitSomeFailed : kExitOk;
}

// --text and --text-file: each text's embedding, or its error, in order; a text cut to the tower's context is said.
int embed_texts(const EmbedCommand& o, const std::vector<TextInput>& texts, const TextModel& model) {
  std::unique_ptr<RowWriter> saved;
  if (!o.out.empty()) saved = std::make_unique<RowWriter>(o.out, model.info().embedding);
  std::string names = "[";
  size_t done = 0, failed = 0;
  for (size_t first = 0; first < texts.size(); first += size_t(o.batch)) {
    std::vector<std::string> batch;
    for (size_t i = first; i < std::min(texts.size(), first + size_t(o.batch)); ++i) batch.push_back(texts[i].text);
    const std::vector<TextEmbedding> rows = model.embed(batch, o.embed.normalize);
    for (size_t j = 0; j < rows.size(); ++j) {
      const TextInput& in = texts[first + j];
      const TextEmbedding& e = rows[j];
      if (!e.error.empty()) {
        ++failed;
        if (saved) std::fprintf(stderr, "error: %s: %s\n", printable(in.name).c_str(), printable(e.error).c_str());
        else std::printf("{\"text\":%s,\"error\":%s}\n", json_string(in.text).c_str(), json_string(in.name + ": " + e.error).c_str());
        continue;
      }
      ++done;
      if (e.truncated)
        std::fprintf(stderr, "warning: %s: %zu bytes, more tokens than the text tower's context of %lld: cut to it as %s "
                     "cuts a text\n", printable(in.name).c_str(), in.text.size(),
                     static_cast<long long>(model.info().context), model.info().tokenizer.c_str());
      if (saved) {
        saved->add(e.embedding.data());
        names += (names.size() > 1 ? "," : "") + json_string(in.text);
        continue;
      }
      nlohmann::json rest = {{"embedding", e.embedding}, {"tokens", e.tokens}};
      if (e.truncated) rest["truncated"] = true;
      std::printf("{\"text\":%s,%s\n", json_string(in.text).c_str(), rest.dump().substr(1).c_str());
    }
    check_stdout();
  }
  if (failed && texts.size() > 1) std::fprintf(stderr, "%zu of %zu texts embedded, %zu failed\n", done, texts.size(), failed);
  if (saved) saved->finish("embeddings", output_metadata("embed", {{"texts", names + "]"}}));
  return failed ? kExitSomeFailed : kExitOk;
}

// The image flags a text has no use for, refused by name rather than ignored.
void check_text_flags(const EmbedCommand& o) {
  const std::string why = " goes with images, not with --text or --text-file";
  if (!o.paths.empty()) throw Error("--text and --text-file embed texts: give no PATH (embed images in another run)");
  if (o.stdin_paths) throw Error("--stdin" + why);
  if (o.embed.head) throw Error("--head" + why + " (a text's embedding is always its tower's projection)");
  if (o.embed.tokens) throw Error("--tokens" + why);
  if (o.model.pool) throw Error("--pool" + why);
  if (o.videos) throw Error("--videos" + why);
  if (o.model.img_size || o.model.max_patches || !o.model.config.empty() || !o.model.arch.empty())
    throw Error("--img-size, --max-patches, --config and --arch" + why);
}

std::function<int()> prepare_embed_text(EmbedCommand o) {
  check_text_flags(o);
  auto texts = std::make_shared<std::vector<TextInput>>(collect_texts(o.texts, "--text", o.text_file, "--text-file"));
  if (texts->empty()) throw Error("--text-file " + printable(o.text_file) + ": no lines, so no texts to embed");
  if (!o.out.empty()) check_output_target(OutputKind::Safetensors, "-o", o.out, KeepFiles{model_files_to_keep(o.model), {o.text_file}}, o.force);
  o.batch = std::max(1, std::min<int>(o.batch, int(texts->size())));
  TextOptions to;
  to.precision = o.model.precision;
  to.threads = o.model.threads;
  to.batch = o.batch;
  auto model = std::make_shared<TextModel>(model_path(o.model), to);
  return [o, texts, model] { return embed_texts(o, *texts, *model); };
}

std::function<int()> prepare_embed(EmbedCommand o) {
  if (!o.texts.empty() || !o.text_file.empty()) return prepare_embed_text(std::move(o));
  if (o.stdin_paths && !o.paths.empty()) throw Error("--stdin reads the paths from standard input: give no PATH");
  if (!o.stdin_paths && o.paths.empty()) throw Error("no PATH: give image files or folders, or --stdin");
  if (o.null_separated && !o.stdin_paths) throw Error("--null (-0) goes with --stdin");
  auto inputs = std::make_shared<std::vector<Input>>(collect_inputs(o.paths, o.videos));
  if (!o.out.empty()) {
    KeepFiles keep{model_files_to_keep(o.model), {}};
    for (const Input& in : *inputs) keep.inputs.push_back(in.file);
    check_output_target(OutputKind::Safetensors, "-o", o.out, keep, o.force);
  }
  // Fewer images than a batch: plans for just those. A video's frames fill whole batches.
  const bool videos = std::any_of(inputs->begin(), inputs->end(), [](const Input& in) { return is_video_name(in.file); });
  if (!o.stdin_paths && !videos) o.batch = std::max(1, std::min<int>(o.batch, int(std::max<size_t>(inputs->size(), 1))));
  ClassifierOptions co = classifier_options(o.model);
  co.batch = o.batch;
  co.max_pixels = o.max_pixels;
  co.exif_transpose = o.exif_transpose;
  auto classifier = std::make_shared<Classifier>(load_classifier(o.model, co));
  const ModelInfo info = classifier->info();
  if (o.embed.tokens && info.max_patches > 0)
    throw Error("--tokens: " + info.file + " is a NaFlex model (" + info.family + "): its token sequences are not "
                "given yet (each image has a grid of its own); embed it without --tokens");
  auto out = std::make_shared<EmbedOutput>(o, *classifier);
  return [o, inputs, classifier, out] { return embed_all(o, *inputs, *classifier, *out); };
}

}  // namespace

void add_embed_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<EmbedCommand>();
  CLI::App* cmd = add_model_command(app, "embed",
                                    "one embedding per image: the pooled features before the head (timm's "
                                    "pre_logits), or after it with --head",
                                    o, prepare_embed, prepare);
  add_load_option(cmd, &o->model, "max_patches");
  cmd->add_flag("--head", o->embed.head, "apply the head too: timm's model(x) (the logits of a classifier)");
  add_load_option(cmd, &o->model, "pool");
  cmd->add_flag("--tokens", o->embed.tokens, "also write the token sequence timm's forward_features returns: its "
                                             "prefix_tokens (class, registers) first, then the patch_grid's tokens "
                                             "row by row (both numbers given beside it)");
  cmd->add_flag("--normalize", o->embed.normalize, "scale each embedding to unit length");
  cmd->add_flag("--stats", o->stats, "print end-to-end images/s on stderr");
  add_name_option(cmd, "-o,--out", &o->out, "write a .safetensors file (embeddings [N, E], tokens [N, T, D]) instead "
                                            "of JSON lines on stdout");
  cmd->add_flag("--force", o->force, "let -o replace an input or a file vit did not write (never the model's own files)");
  add_batch_option(cmd, &o->batch);
  add_number_option(cmd, "--max-pixels", &o->max_pixels, int64_t(1), int64_t(1) << 40,
                    "refuse images larger than this many pixels, from their header, before decoding");
  cmd->add_flag("--stdin", o->stdin_paths, "read the paths from standard input, one per line");
  cmd->add_flag("-0,--null", o->null_separated, "with --stdin: paths end with NUL, as find -print0 writes them");
  cmd->add_flag("--exif-transpose", o->exif_transpose, "turn images as their EXIF orientation says");
  CLI::Option* every = add_number_option(cmd, "--every", &o->embed.video.every, 1, 1 << 30,
                                         "videos: embed every Nth frame (default: one frame per second of video)");
  every->default_str("");  // unset means --fps's sampling, not a frame count of 0, which is out of range
  add_number_option(cmd, "--fps", &o->embed.video.fps, 0.001, 1000.0,
                    "videos: embed this many frames per second of video (default 1)")
      ->excludes(every);
  cmd->add_option("--text", o->texts, "embed this text with the model's text tower (a CLIP or SigLIP model's), as "
                                     "open_clip's encode_text does; repeatable: one JSON line per text, {\"text\", "
                                     "\"embedding\", \"tokens\"}")
      ->allow_extra_args(false);
  add_name_option(cmd, "--text-file", &o->text_file, "embed each line of this UTF-8 file as a text (CRLF endings taken)");
  cmd->add_flag("--videos", o->videos, "also take videos from folders (videos named as PATH always are)");
  cmd->add_option("PATH", o->paths,
                  "images (" + image_extensions() + "), videos (" + video_extensions() +
                      ") or folders, searched recursively for images (and videos with --videos); a video's "
                      "embedding is the mean of its sampled frames' (and with --tokens its tokens, the mean of "
                      "theirs)");
}

}  // namespace vit::app
