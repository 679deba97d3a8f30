// `vit embed --text` / `--text-file` and `vit classify --labels-text` on tests/make_text_models.py's random-weight
// models: the text embeddings are open_clip's encode_text within 1e-5, as JSON lines and in an -o file; bad texts are
// named and the others embedded; a model without a text tower or without its tokenizer is refused by name; the
// zero-shot probabilities are open_clip's own zero-shot classifier's within 1e-5 and those of the same run with
// scripts/export_text_embeddings.py's file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "engine/io/safetensors.h"
#include "model_files.h"
#include "test_util.h"
#include "text_models.h"
#include "vit/text.h"

namespace vit::test {
namespace {

class TextCli : public GeneratedSuite<TextModels> {
 protected:
  static std::string m(const std::string& name) { return "--model " + model(name); }
  // Row i of the reference embeddings of model `name` (text_reference.safetensors, TOWER_STRINGS's order).
  static std::vector<float> reference_row(const std::string& name, size_t i) {
    const SafeTensors ref(model(name) + "/text_reference.safetensors");
    const std::vector<float> all = ref.to_f32("embeddings");
    const size_t E = size_t(ref.get("embeddings").shape[1]);
    return std::vector<float>(all.begin() + long(i * E), all.begin() + long((i + 1) * E));
  }
};

// TOWER_STRINGS[0] and [4]: "a photo of a dog", "café crème"; [6]: "tench " * 120, cut to 77 tokens.
TEST_F(TextCli, EmbedTextLikeEncodeText) {
  for (const char* name : {"oc_clip", "oc_siglip", "hf_clip"}) {
    const Result r = run_vit("embed " + m(name) + " --text 'a photo of a dog' --text 'café crème'");
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    const auto lines = json_lines(r.out);
    ASSERT_EQ(lines.size(), 2u) << r.out;
    EXPECT_EQ(lines[0]["text"], "a photo of a dog");
    EXPECT_EQ(lines[1]["text"], "café crème");
    float worst = 0;
    for (size_t i = 0; i < 2; ++i)
      worst = std::max(worst, max_abs_diff(lines[i]["embedding"].get<std::vector<float>>(), reference_row(name, i * 4)));
    EXPECT_LT(worst, 1e-5f) << name;
    std::printf("vit embed --text, %s: max |difference| from the reference %.2e\n", name, double(worst));
  }
}

// The same texts from a file (CRLF endings, a byte order mark) into -o: rows and names in order.
TEST_F(TextCli, TextFileToSafetensors) {
  const TempDir d;
  std::string tench;
  for (int i = 0; i < 120; ++i) tench += "tench ";
  write_file(d.file("texts.txt"), "\xef\xbb\xbf" "a photo of a dog\r\ncafé crème\n" + tench + "\n");
  const Result r = run_vit("embed " + m("oc_clip") + " --text-file " + d.file("texts.txt") + " -o " + d.file("t.safetensors"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("line 3: 720 bytes, more tokens than the text tower's context of 77: cut"), std::string::npos) << r.err;
  const SafeTensors st(d.file("t.safetensors"));
  ASSERT_EQ(st.get("embeddings").shape, (std::vector<int64_t>{3, 32}));
  const std::vector<float> rows = st.to_f32("embeddings");
  const size_t refs[] = {0, 4, 6};
  for (size_t i = 0; i < 3; ++i)
    EXPECT_LT(max_abs_diff(std::vector<float>(rows.begin() + long(i * 32), rows.begin() + long((i + 1) * 32)),
                           reference_row("oc_clip", refs[i])), 1e-5f) << "row " << i;
  const auto texts = nlohmann::json::parse(st.metadata().at("texts"));
  EXPECT_EQ(texts[1], "café crème");
  EXPECT_EQ(st.metadata().at("written_by"), "vit embed");
}

// An empty text, invalid UTF-8, NUL: each named with its place, the good texts embedded (exit 1); 100,000
// characters cut and said; a model without a text tower, a missing or corrupt tokenizer file: exit 2 naming it.
TEST_F(TextCli, BadTextsAreNamed) {
  const TempDir d;
  const char bad[] = "a dog\ncaf\xc3\na\0b\n\na cat\n";
  write_file(d.file("bad.txt"), std::string(bad, sizeof bad - 1));
  Result r = run_vit("embed " + m("oc_clip") + " --text-file " + d.file("bad.txt"));
  EXPECT_EQ(r.code, 1) << r.err;
  // The text that is not UTF-8 is written as file names are (Python's surrogate escape: "caf\udcc3"), which
  // nlohmann's parser refuses: that line is read as it is, the others as JSON.
  std::vector<std::string> raw;
  for (size_t a = 0, b; (b = r.out.find('\n', a)) != std::string::npos; a = b + 1) raw.push_back(r.out.substr(a, b - a));
  ASSERT_EQ(raw.size(), 5u) << r.out;
  EXPECT_EQ(raw[1], "{\"text\":\"caf\\udcc3\",\"error\":\"" + d.file("bad.txt") +
                        " line 2: not valid UTF-8: byte 3 (0xc3) starts no valid character\"}");
  std::vector<nlohmann::json> lines;
  for (size_t i : {0, 2, 3, 4}) lines.push_back(nlohmann::json::parse(raw[i]));
  EXPECT_TRUE(lines[0].contains("embedding"));
  EXPECT_NE(lines[1]["error"].get<std::string>().find("bad.txt line 3: holds a NUL byte (at byte 1)"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2]["error"].get<std::string>().find("line 4: empty"), std::string::npos) << lines[2];
  EXPECT_TRUE(lines[3].contains("embedding"));
  EXPECT_NE(r.err.find("2 of 5 texts embedded, 3 failed"), std::string::npos) << r.err;

  r = run_vit("embed " + m("oc_clip") + " --text ''");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--text 1: empty"), std::string::npos) << r.out;

  write_file(d.file("long.txt"), std::string(100000, 'a') + "\n");
  r = run_vit("embed " + m("oc_siglip") + " --text-file " + d.file("long.txt"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("100000 bytes, more tokens than the text tower's context of 64: cut to it"), std::string::npos) << r.err;
  lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_EQ(lines[0]["truncated"], true);
  EXPECT_EQ(lines[0]["tokens"], 64);

  const TempDir image_only;
  write_tiny_model(image_only.path(), TinySpec{});
  r = run_vit("embed --model " + image_only.path() + " --text 'a dog'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("has no text tower"), std::string::npos) << r.err;

  const std::string copy = d.file("oc_clip");
  std::filesystem::copy(model("oc_clip"), copy);
  write_file(copy + "/bpe_simple_vocab_16e6.txt.gz", "not gzip");
  r = run_vit("embed --model " + copy + " --text 'a dog'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bpe_simple_vocab_16e6.txt.gz"), std::string::npos) << r.err;
  std::filesystem::remove(copy + "/bpe_simple_vocab_16e6.txt.gz");
  r = run_vit("embed --model " + copy + " --text 'a dog'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bpe_simple_vocab_16e6.txt.gz"), std::string::npos) << r.err;

  r = run_vit("embed " + m("oc_clip") + " --text 'a dog' " + d.file("bad.txt"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("give no PATH"), std::string::npos) << r.err;
  r = run_vit("embed " + m("oc_clip") + " --text-file " + d.file("missing.txt"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--text-file " + d.file("missing.txt")), std::string::npos) << r.err;
}

// vit inspect names the text tower, its tokenizer and context, or says there is none, or why it cannot run.
TEST_F(TextCli, InspectNamesTheTextTower) {
  Result r = run_vit("inspect " + model("oc_siglip"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("text tower     SigLIP text: 2 blocks of width 64, 2 heads"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer      open_clip's SentencePiece (canonicalized) (" + model("oc_siglip") +
                       "/spiece.model), context 64 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("each class's sigmoid"), std::string::npos) << r.out;
  r = run_vit("inspect " + model("oc_clip"));
  EXPECT_NE(r.out.find("context 77 tokens"), std::string::npos) << r.out;
  const TempDir image_only, d;
  write_tiny_model(image_only.path(), TinySpec{});
  r = run_vit("inspect " + image_only.path());
  EXPECT_NE(r.out.find("text tower     none (an image tower alone)"), std::string::npos) << r.out;
  const std::string copy = d.file("oc_clip");
  std::filesystem::copy(model("oc_clip"), copy);
  std::filesystem::remove(copy + "/bpe_simple_vocab_16e6.txt.gz");
  r = run_vit("inspect " + copy);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("text tower     cannot be run: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bpe_simple_vocab_16e6.txt.gz"), std::string::npos) << r.out;
}

// vit bench --text: one JSON line per batch size with its strings/s (no timing is asserted), and its refusals.
TEST_F(TextCli, BenchTimesTheTextTower) {
  Result r = run_vit("bench " + m("oc_siglip") + " --text -b 1,3 --iters 2 --warmup 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[1]["batch"], 3);
  EXPECT_EQ(lines[1]["tower"], "text");
  EXPECT_EQ(lines[1]["runs"], 2);
  EXPECT_GT(lines[1]["strings_per_sec"].get<double>(), 0);
  r = run_vit("bench --text --arch vit_base_patch16_224");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--text times a model's text tower: give --model"), std::string::npos) << r.err;
  const TempDir image_only;
  write_tiny_model(image_only.path(), TinySpec{});
  r = run_vit("bench --text -m " + image_only.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("has no text tower"), std::string::npos) << r.err;
}

class ZeroShotCli : public TextCli {
 protected:
  void SetUp() override {
    TextCli::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    REQUIRE_SHARED_DATA();
    ref_ = nlohmann::json::parse(read_file(model("oc_clip") + "/zero_shot.json"));
    for (const auto& p : ref_["photos"]) photos_ += " " + p.get<std::string>();
  }
  // `vit classify ARGS --json -k all` on the photos: each photo's probabilities, in class order.
  std::vector<std::vector<float>> probabilities(const std::string& args) const {
    const Result r = run_vit("classify " + m("oc_clip") + " --json -k 100 " + args + photos_);
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<std::vector<float>> out;
    std::map<std::string, size_t> index;
    for (size_t c = 0; c < ref_["classes"].size(); ++c) index[ref_["classes"][c]] = c;
    for (const auto& line : json_lines(r.out)) {
      std::vector<float> p(index.size(), -1);
      for (const auto& t : line["top"]) p.at(index.at(t["label"].get<std::string>())) = t["prob"];
      out.push_back(p);
    }
    return out;
  }
  static float max_diff(const std::vector<std::vector<float>>& a, const nlohmann::json& b) {
    float worst = 0;
    EXPECT_EQ(a.size(), b.size());
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      worst = std::max(worst, max_abs_diff(a[i], b[i].get<std::vector<float>>()));
    return worst;
  }
  nlohmann::json ref_;
  std::string photos_;
};

// --labels-text-file with each template set: open_clip's zero-shot classifier's class embeddings and probabilities.
TEST_F(ZeroShotCli, ProbabilitiesLikeOpenClips) {
  const std::string classes = model("oc_clip") + "/classes.txt";
  const TextModel text(model("oc_clip"));
  for (const auto& [name, templates] : {std::pair{"imagenet", PromptTemplates::ImageNet}, std::pair{"simple", PromptTemplates::Simple}}) {
    std::vector<std::string> names = ref_["classes"];
    const std::vector<float> ours = text.class_embeddings(names, templates);
    std::vector<float> theirs;
    for (const auto& row : ref_[name]["classifier"])
      for (float x : row.get<std::vector<float>>()) theirs.push_back(x);
    const float classifier = max_abs_diff(ours, theirs);
    EXPECT_LT(classifier, 1e-5f) << name;
    const float probs = max_diff(probabilities("--labels-text-file " + classes + " --templates " + name), ref_[name]["probs"]);
    EXPECT_LT(probs, 1e-5f) << name;
    std::printf("zero-shot, %s templates: class embeddings max |difference| %.2e, probabilities %.2e\n", name,
                double(classifier), double(probs));
  }
  // The names given on the command line: the same classes, in the same order, without the one holding a comma.
  const auto given = probabilities("--labels-text 'tench, goldfish,great white shark' --templates simple");
  ASSERT_EQ(given.size(), ref_["photos"].size());
  EXPECT_GE(given[0][0], 0.0f);
  EXPECT_GE(given[0][2], 0.0f);
}

// The same probabilities as the same run with scripts/export_text_embeddings.py's file (open_clip's 80 templates).
TEST_F(ZeroShotCli, SameAsAnExportedTextEmbeddingsFile) {
  const TempDir d;
  const std::string classes = model("oc_clip") + "/classes.txt", file = d.file("classes.safetensors");
  ASSERT_EQ(run_shell(kVenvPython + " " VIT_SOURCE_DIR "/scripts/export_text_embeddings.py --model " + model("oc_clip") +
                      " --classes " + classes + " --templates openai -o " + file + " >/dev/null"), 0);
  const auto exported = probabilities("--text-embeddings " + file);
  const auto ours = probabilities("--labels-text-file " + classes + " --templates imagenet");
  ASSERT_EQ(exported.size(), ours.size());
  float worst = 0;
  for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, max_abs_diff(ours[i], exported[i]));
  EXPECT_LT(worst, 1e-5f);
  std::printf("zero-shot: --labels-text against --text-embeddings from scripts/export_text_embeddings.py: %.2e\n",
              double(worst));
}

TEST_F(ZeroShotCli, BadClassNamesAreNamed) {
  Result r = run_vit("classify " + m("oc_clip") + " --labels-text 'tench,,goldfish'" + photos_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--labels-text name 2: an empty class name"), std::string::npos) << r.err;
  r = run_vit("classify " + m("oc_clip") + " --labels-text 'tench,goldfish,tench'" + photos_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--labels-text name 3: the class 'tench' is there twice"), std::string::npos) << r.err;
  r = run_vit("classify " + m("oc_clip") + " --labels-text tench --templates fancy" + photos_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("fancy"), std::string::npos) << r.err;
  const TempDir image_only;
  write_tiny_model(image_only.path(), TinySpec{});
  r = run_vit("classify --model " + image_only.path() + " --labels-text tench" + photos_);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("has no text tower"), std::string::npos) << r.err;
}

// Search end to end: the 250 sample photos by `vit embed --head`, 20 queries by `vit embed --text-file`, ranked by
// cosine; open_clip's ranking of the same photos (its own preprocessing) for the same queries on the same model
// (tests/retrieval_reference.py): the same top 10, in the same order, for every query.
TEST_F(TextCli, SearchPhotosLikeOpenClip) {
  REQUIRE_SHARED_DATA();
  const TempDir d;
  const std::vector<std::string> queries = {
      "a photo of a dog", "a cat", "tench", "goldfish", "a red car", "an airliner in the sky", "a beach",
      "a bird on a branch", "food on a plate", "a snake", "a person", "a house", "a boat on the water", "a flower",
      "a monkey", "a spider", "café crème", "猫と犬", "A PHOTO OF A TRUCK!!!", "mountains at dusk"};
  std::string lines;
  for (const std::string& q : queries) lines += q + "\n";
  write_file(d.file("queries.txt"), lines);
  Result r = run_vit("embed " + m("oc_clip") + " --head --normalize -o " + d.file("photos.safetensors") + " " +
                     shared_data() + "/images/imagenet-samples");
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_vit("embed " + m("oc_clip") + " --normalize --text-file " + d.file("queries.txt") + " -o " +
              d.file("queries.safetensors"));
  ASSERT_EQ(r.code, 0) << r.err;
  const SafeTensors photos(d.file("photos.safetensors")), texts(d.file("queries.safetensors"));
  const std::vector<std::string> files = nlohmann::json::parse(photos.metadata().at("files"));
  ASSERT_EQ(files.size(), 250u);
  std::string args;
  for (const std::string& f : files) args += " " + f;
  ASSERT_EQ(run_shell(kVenvPython + " " VIT_SOURCE_DIR "/tests/retrieval_reference.py " + model("oc_clip") + " " +
                      d.file("queries.txt") + " " + d.file("reference.json") + args), 0);
  const nlohmann::json ref = nlohmann::json::parse(read_file(d.file("reference.json")));
  const std::vector<float> p = photos.to_f32("embeddings"), t = texts.to_f32("embeddings");
  const size_t E = size_t(photos.get("embeddings").shape[1]);
  ASSERT_EQ(t.size(), queries.size() * E);
  float worst = 0;
  for (size_t q = 0; q < queries.size(); ++q) {
    std::vector<std::pair<float, int>> scored;
    for (size_t i = 0; i < files.size(); ++i) {
      float dot = 0;
      for (size_t e = 0; e < E; ++e) dot += t[q * E + e] * p[i * E + e];
      scored.push_back({-dot, int(i)});
    }
    std::partial_sort(scored.begin(), scored.begin() + 10, scored.end());
    std::vector<int> top;
    for (int k = 0; k < 10; ++k) {
      top.push_back(scored[size_t(k)].second);
      worst = std::max(worst, std::abs(-scored[size_t(k)].first - ref["scores"][q][k].get<float>()));
    }
    EXPECT_EQ(top, ref["top"][q].get<std::vector<int>>()) << "query " << q << ": " << queries[q];
  }
  std::printf("search: 20 queries over 250 photos ranked against open_clip's top 10; the largest cosine difference %.2e\n",
              double(worst));
}

}  // namespace
}  // namespace vit::test
