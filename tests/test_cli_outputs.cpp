// What the commands write and where: no output replaces a file the model is loaded from, an input, or a
// file this engine did not write (unless --force); `vit quantize` checks its output and calibration
// inputs before it calibrates and copies what loading reads; what the outputs record (labels, tokens).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli_util.h"
#include "engine/io/safetensors.h"
#include "model_files.h"
#include "vit/class_embeddings.h"
#include "vit/vit.h"

namespace vit::test {
namespace {

namespace fs = std::filesystem;

// A tiny OpenCLIP image tower (open_clip_model.safetensors, open_clip_config.json): a projection of
// width 10 and no classifier, as test_model.cpp builds it.
void write_tiny_openclip(const std::string& dir) {
  TinySpec s;
  TensorMap t = tiny_vit_tensors(s, 21);
  for (const char* bias : {"patch_embed.proj.bias", "head.bias"}) std::fill(t[bias].second.begin(), t[bias].second.end(), 0.f);
  add_norm_pre(t, s.D, 11);
  write_tensors(dir + "/open_clip_model.safetensors", to_openclip_layout(t, s.depth));
  const nlohmann::json config = {{"model_cfg", {{"embed_dim", 10}, {"vision_cfg", {{"width", 32}, {"layers", 2}, {"head_width", 16},
                                                                                {"patch_size", 8}, {"image_size", 32}}}}}};
  write_file(dir + "/open_clip_config.json", config.dump());
}

// A zero-shot labels file as scripts/export_text_embeddings.py writes one, with `metadata` over its own.
void write_text_embeddings(const std::string& path, const std::vector<std::string>& labels,
                           std::map<std::string, std::string> metadata) {
  std::vector<float> e(labels.size() * 10);
  for (size_t i = 0; i < e.size(); ++i) e[i] = float((i * 7) % 11) - 5.f;
  std::map<std::string, std::string> meta = {{"labels", nlohmann::json(labels).dump()}, {"logit_scale", "100.0"},
                                             {"activation", "softmax"}};
  for (const auto& [k, v] : metadata) {
    if (v.empty()) meta.erase(k);
    else meta[k] = v;
  }
  write_safetensors(path, {{"text_embeddings", {int64_t(labels.size()), 10}, e.data()}}, meta);
}

// Item: `vit embed -m DIR -o DIR/model.safetensors` replaced the checkpoint with its embeddings. Now no
// output may be a file loading the model reads, or would read (an int8.safetensors not there yet), in
// any command, even with --force; nothing is run and the files are as they were.
TEST_F(Cli, OutputsNeverReplaceTheModelsOwnFiles) {
  const std::string dir = model_.path(), a = images_.file("a.jpg");
  const std::string weights = read_file(dir + "/model.safetensors"), config = read_file(dir + "/config.json");
  const std::vector<std::string> runs = {
      "embed -m " + dir + " -o " + dir + "/model.safetensors " + a,
      "embed -m " + dir + " --force -o " + dir + "/model.safetensors " + a,
      "embed -m " + dir + "/ -o " + dir + "/config.json " + a,
      "embed -m " + dir + "/model.safetensors -o " + dir + "/config.json " + a,
      "embed -m " + dir + " -o " + dir + "/int8.safetensors " + a,
      "embed -m " + dir + " -o " + dir + "/preprocessor_config.json " + a,
      "classify -m " + dir + " --save-logits " + dir + "/model.safetensors " + a,
      "classify -m " + dir + " --force --save-logits " + dir + "/config.json " + a,
      "explain -m " + dir + " --out " + images_.path() + " --save-attention " + dir + "/model.safetensors " + a,
  };
  for (const std::string& run : runs) {
    const Result r = run_vit(run);
    EXPECT_EQ(r.code, 2) << run << "\n" << r.err;
    EXPECT_EQ(r.out, "") << run;
    EXPECT_NE(r.err.find("is a file loading the model reads (its weights, config or int8.safetensors); never "
                         "overwritten, even with --force"),
              std::string::npos)
        << run << "\n" << r.err;
  }
  EXPECT_EQ(read_file(dir + "/model.safetensors"), weights);
  EXPECT_EQ(read_file(dir + "/config.json"), config);
  EXPECT_FALSE(fs::exists(dir + "/int8.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/preprocessor_config.json"));
  // A --config given instead of the one beside, and a folder vit quantize made: its int8 weights.
  TempDir q;
  write_file(q.file("other.json"), config);
  Result r = run_vit("classify -m " + dir + " --config " + q.file("other.json") + " --save-logits " + q.file("other.json") + " " + a);
  EXPECT_EQ(r.code, 2) << r.err;
  ASSERT_EQ(run_vit("quantize -m " + dir + " --calib " + a + " -o " + q.file("q")).code, 0);
  const std::string rounded = read_file(q.file("q/int8.safetensors"));
  r = run_vit("classify -m " + q.file("q") + " --precision int8 --save-logits " + q.file("q/int8.safetensors") + " " + a);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(read_file(q.file("q/int8.safetensors")), rounded);
  // OpenCLIP's names.
  TempDir oc;
  write_tiny_openclip(oc.path());
  for (const char* file : {"open_clip_model.safetensors", "open_clip_config.json"}) {
    r = run_vit("embed -m " + oc.path() + " -o " + oc.file(file) + " " + a);
    EXPECT_EQ(r.code, 2) << file << ": " << r.err;
  }
  // Beside the model, any other name is an output like any other.
  r = run_vit("embed -m " + dir + " -o " + dir + "/embeddings.safetensors " + a);
  EXPECT_EQ(r.code, 0) << r.err;
}

// Only files this engine wrote are replaced without --force: a safetensors file another program wrote
// (a checkpoint) is refused by name, as any other file is; logits, embeddings and attention files the
// engine wrote (and say so in their metadata, or, written before that, hold the files of their rows)
// are replaced; so are explain's own pictures, but not a picture of the user's in their place.
TEST_F(Cli, OutputsReplaceOnlyFilesThisEngineWrote) {
  TempDir out;
  const std::string a = images_.file("a.jpg"), target = out.file("t.safetensors");
  const float x[2] = {1.f, 2.f};
  write_safetensors(target, {{"weight", {2}, x}}, {{"format", "pt"}});
  const std::string stranger = read_file(target);
  for (const std::string& run : {"embed " + model() + " -o " + target + " " + a,
                                 "classify " + model() + " --save-logits " + target + " " + a,
                                 "explain " + model() + " --out " + out.path() + " --save-attention " + target + " " + a}) {
    const Result r = run_vit(run);
    EXPECT_EQ(r.code, 2) << run << "\n" << r.err;
    EXPECT_NE(r.err.find(target + ": exists and is not a safetensors file this engine wrote"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("(--force to overwrite it)"), std::string::npos) << r.err;
  }
  EXPECT_EQ(read_file(target), stranger);
  // Each command's own output is replaced by any other's, and says who wrote it.
  Result r = run_vit("classify " + model() + " --force --save-logits " + target + " " + a);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(SafeTensors(target).metadata().at("written_by"), "vit classify");
  r = run_vit("embed " + model() + " -o " + target + " " + a);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(SafeTensors(target).metadata().at("written_by"), "vit embed");
  r = run_vit("explain " + model() + " --out " + out.path() + " --save-attention " + target + " " + a);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(SafeTensors(target).metadata().at("written_by"), "vit explain");
  // An output written before the mark: its files list.
  write_safetensors(target, {{"logits", {1, 2}, x}}, {{"files", "[\"a.jpg\"]"}});
  EXPECT_EQ(run_vit("classify " + model() + " --save-logits " + target + " " + a).code, 0);

  // explain's pictures: its own are drawn again; a PNG of the user's where one would go is refused.
  const std::string picture = out.file("a.attention.png");
  ASSERT_TRUE(fs::exists(picture));
  r = run_vit("explain " + model() + " --out " + out.path() + " " + a);
  EXPECT_EQ(r.code, 0) << r.err;
  fs::copy_file(images_.file("b.PNG"), out.file("c.attention.png"));
  const std::string mine = read_file(out.file("c.attention.png"));
  r = run_vit("explain " + model() + " --out " + out.path() + " " + a + " " + images_.file("c.bmp"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--out " + out.file("c.attention.png") + ": exists and is not a picture vit explain drew"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read_file(out.file("c.attention.png")), mine);
  r = run_vit("explain " + model() + " --force --out " + out.path() + " " + images_.file("c.bmp"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(read_file(out.file("c.attention.png")), mine);
  // --heads pictures too.
  write_file(out.file("a.heads.png"), "my notes");
  r = run_vit("explain " + model() + " --heads --out " + out.path() + " " + a);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(read_file(out.file("a.heads.png")), "my notes");
}

// An empty name is no file: refused at parsing, never taken for "not given" (embed -o '' wrote JSON
// lines to stdout, bench --arch '' benchmarked the default model).
TEST_F(Cli, EmptyNamesAreRefused) {
  const std::string a = images_.file("a.jpg");
  for (const std::string& run :
       {"embed " + model() + " -o '' " + a, "classify " + model() + " --save-logits '' " + a,
        "explain " + model() + " --out '' " + a, "explain " + model() + " --save-attention '' " + a,
        "quantize " + model() + " --calib " + a + " -o ''", std::string("bench --arch '' --iters 1 --batch 1")}) {
    const Result r = run_vit(run);
    EXPECT_EQ(r.code, 2) << run << "\n" << r.out;
    EXPECT_EQ(r.out, "") << run;
    EXPECT_NE(r.err.find("an empty name names nothing"), std::string::npos) << run << "\n" << r.err;
  }
}

// vit quantize checks its output before it calibrates: a folder that cannot take a new one (/proc takes
// none, even for root) is exit 2 with nothing run (it was exit 4 after the work); a file where a folder
// should be and a calibration PATH that does not exist are named.
TEST_F(Cli, QuantizeChecksItsOutputAndInputsFirst) {
  Result r = run_vit("quantize " + model() + " --calib " + images_.path() + " -o /proc/vit_quantized");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("error: /proc/vit_quantized: cannot create a folder in /proc"), std::string::npos) << r.err;
  const std::string a = images_.file("a.jpg");
  r = run_vit("quantize " + model() + " --calib " + images_.path() + " -o " + a + "/sub");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: " + a + "/sub: " + a + " is a file, not a folder"), std::string::npos) << r.err;
  r = run_vit("quantize " + model() + " --calib " + images_.path() + " -o " + a + "/deeper/sub");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(a + " is a file, not a folder"), std::string::npos) << r.err;
  TempDir out;
  r = run_vit("quantize " + model() + " --calib /nonexistent/calib -o " + out.file("q"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: --calib /nonexistent/calib: no such file or folder"), std::string::npos) << r.err;
  r = run_vit("quantize " + model() + " --calib " + a + " /nonexistent/calib -o " + out.file("q"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_FALSE(fs::exists(out.file("q")));
  // An image that does not decode is an error line as in every command, the others used.
  r = run_vit("quantize " + model() + " --calib " + images_.path() + " -o " + out.file("q"));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("error: " + images_.file("d_broken.jpg") + ": not a supported image"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(not used)"), std::string::npos) << r.err;
}

// vit quantize copies what loading reads, found as loading finds it: an OpenCLIP tower's own names (its
// config would be lost as config.json) and a checkpoint not named model.safetensors, which the folder
// keeps, as its "run it with" line says; each runs at int8 from its rounded weights.
TEST_F(Cli, QuantizeCopiesWhatLoadingReads) {
  TempDir oc, out;
  write_tiny_openclip(oc.path());
  Result r = run_vit("quantize -m " + oc.path() + " --calib " + images_.file("a.jpg") + " -o " + out.file("q"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(out.file("q"))) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"open_clip_model.safetensors", "open_clip_config.json", "int8.safetensors"}));
  r = run_vit("embed -m " + out.file("q") + " --precision int8 " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 0) << r.err;

  fs::copy_file(model_.file("model.safetensors"), oc.file("tiny.safetensors"));
  fs::copy_file(model_.file("config.json"), oc.file("config.json"));
  r = run_vit("quantize -m " + oc.file("tiny.safetensors") + " --calib " + images_.file("a.jpg") + " -o " + out.file("t"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("run it with: --model " + out.file("t/tiny.safetensors") + " --precision int8"), std::string::npos)
      << r.out;
  r = run_vit("inspect -m " + out.file("t/tiny.safetensors") + " --precision int8");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(out.file("t/int8.safetensors") + ": rounded by vit quantize (GPTQ), used"), std::string::npos)
      << r.out;
}

// A model folder named with a trailing slash: its files are found as without one, and named with one
// slash ("DIR//config.json" before).
TEST_F(Cli, AFolderWithATrailingSlashNamesItsFilesOnce) {
  const Result r = run_vit("inspect " + model_.path() + "/");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(model_.path() + "/config.json"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("//"), std::string::npos) << r.out;
}

// --save-logits of zero-shot scores records the labels of its columns (the zero-shot file's), as every
// logits file now does (the model's, or --labels').
TEST_F(Cli, SavedLogitsRecordTheirLabels) {
  TempDir oc, out;
  write_tiny_openclip(oc.path());
  const std::vector<std::string> labels = {"a cat", "a dog", "caf\xc3\xa9"};
  write_text_embeddings(out.file("text.safetensors"), labels, {});
  Result r = run_vit("classify -m " + oc.path() + " --text-embeddings " + out.file("text.safetensors") +
                     " --save-logits " + out.file("l.safetensors") + " " + images_.file("a.jpg"));
  ASSERT_EQ(r.code, 0) << r.err;
  SafeTensors st(out.file("l.safetensors"));
  EXPECT_EQ(st.get("logits").shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(nlohmann::json::parse(st.metadata().at("labels")), nlohmann::json(labels));
  r = run_vit("classify " + model() + " --save-logits " + out.file("m.safetensors") + " " + images_.file("a.jpg"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto model_labels = nlohmann::json::parse(SafeTensors(out.file("m.safetensors")).metadata().at("labels"));
  ASSERT_EQ(model_labels.size(), 10u);
  EXPECT_EQ(model_labels[0], "class_0");
}

// Text-embedding files that would score quietly wrong are refused by name: a label twice, sigmoid
// (SigLIP) without its logit_bias, no activation at all.
TEST_F(Cli, ZeroShotFilesThatWouldGuessAreRefused) {
  TempDir oc, out;
  write_tiny_openclip(oc.path());
  const std::string file = out.file("text.safetensors");
  const auto run = [&] {
    return run_vit("classify -m " + oc.path() + " --text-embeddings " + file + " " + images_.file("a.jpg"));
  };
  write_text_embeddings(file, {"cat", "dog", "cat"}, {});
  Result r = run();
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(file + ": the label 'cat' is there twice"), std::string::npos) << r.err;
  write_text_embeddings(file, {"cat", "dog"}, {{"activation", "sigmoid"}});
  r = run();
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(file + ": activation sigmoid (SigLIP) without its logit_bias"), std::string::npos) << r.err;
  write_text_embeddings(file, {"cat", "dog"}, {{"activation", ""}});
  r = run();
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(file + ": no activation in its __metadata__ (softmax for CLIP, sigmoid for SigLIP)"),
            std::string::npos)
      << r.err;
  write_text_embeddings(file, {"cat", "dog"}, {{"activation", "sigmoid"}, {"logit_bias", "-10"}});
  r = run();
  EXPECT_EQ(r.code, 0) << r.err;
}

// Zero-shot classes in memory (LoadOptions::class_embeddings, what `vit classify --labels-text` passes): the same
// scores as the file they are read from, written back as the same file, and checked as a file's are.
TEST(ClassEmbeddings, InMemoryScoreAsTheirFile) {
  TempDir oc, out;
  write_tiny_openclip(oc.path());
  const std::string file = out.file("text.safetensors");
  write_text_embeddings(file, {"cat", "dog", "bird"}, {{"activation", "sigmoid"}, {"logit_bias", "-2.5"}});
  const ClassEmbeddings read = read_class_embeddings(file);
  EXPECT_EQ(read.labels, (std::vector<std::string>{"cat", "dog", "bird"}));
  EXPECT_EQ(read.width, 10);
  EXPECT_EQ(read.activation, ZeroShotActivation::Sigmoid);
  EXPECT_EQ(read.logit_bias, -2.5f);
  write_class_embeddings(out.file("again.safetensors"), read, "tiny");
  const ClassEmbeddings again = read_class_embeddings(out.file("again.safetensors"));
  EXPECT_EQ(again.rows, read.rows);
  EXPECT_EQ(again.labels, read.labels);
  EXPECT_EQ(again.logit_scale, read.logit_scale);
  EXPECT_EQ(again.logit_bias, read.logit_bias);
  EXPECT_EQ(again.activation, read.activation);
  ClassifierOptions from_file, in_memory;
  from_file.text_embeddings = file;
  in_memory.class_embeddings = std::make_shared<const ClassEmbeddings>(read);
  const Classifier a(oc.path(), from_file), b(oc.path(), in_memory);
  EXPECT_EQ(b.labels(), a.labels());
  const std::vector<float> x(2 * 3 * 32 * 32, 0.25f);
  EXPECT_EQ(b.logits(x.data(), 2), a.logits(x.data(), 2));
  ClassEmbeddings bad = read;
  bad.labels[2] = "cat";
  in_memory.class_embeddings = std::make_shared<const ClassEmbeddings>(bad);
  expect_error([&] { Classifier(oc.path(), in_memory); }, "class embeddings: the label 'cat' is there twice");
  bad = read;
  bad.width = 5;
  bad.rows.resize(15);
  in_memory.class_embeddings = std::make_shared<const ClassEmbeddings>(bad);
  expect_error([&] { Classifier(oc.path(), in_memory); }, "class embeddings: text embeddings of width 5, but the model's");
  in_memory.class_embeddings = std::make_shared<const ClassEmbeddings>(read);
  in_memory.labels = file;
  expect_error([&] { Classifier(oc.path(), in_memory); }, "class embeddings and a labels file both name the classes");
}

// --tokens says what its rows hold: the prefix tokens (class, registers) first, then the patch grid's
// tokens row by row; both numbers in the JSON lines and in the -o file's metadata.
TEST_F(Cli, TokensRecordTheirPrefixAndGrid) {
  TempDir out;
  Result r = run_vit("embed " + model() + " --tokens " + images_.file("a.jpg"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto line = json_lines(r.out).at(0);
  EXPECT_EQ(line.value("prefix_tokens", -1), 1) << r.out.substr(0, 200);
  EXPECT_EQ(line.value("patch_grid", nlohmann::json()), nlohmann::json({4, 4}));
  EXPECT_EQ(line["tokens"].size(), 17u * 32);
  r = run_vit("embed " + model() + " --tokens --img-size 48 -o " + out.file("e.safetensors") + " " + images_.file("a.jpg"));
  ASSERT_EQ(r.code, 0) << r.err;
  SafeTensors st(out.file("e.safetensors"));
  EXPECT_EQ(st.get("tokens").shape, (std::vector<int64_t>{1, 37, 32}));
  EXPECT_EQ(st.metadata().at("prefix_tokens"), "1");
  EXPECT_EQ(st.metadata().at("patch_grid"), "[6,6]");
  // A model without a class token: no prefix.
  TempDir avg;
  TinySpec s;
  s.class_token = false;
  write_tiny_model(avg.path(), s);
  r = run_vit("embed -m " + avg.path() + " --tokens " + images_.file("a.jpg"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json_lines(r.out).at(0).value("prefix_tokens", -1), 0);
}

// --stats, as vit classify's: one line of images/s on stderr, the embeddings unchanged on stdout.
TEST_F(Cli, EmbedStatsPrintsImagesPerSecond) {
  const Result plain = run_vit("embed " + model() + " " + images_.file("a.jpg"));
  const Result r = run_vit("embed " + model() + " --stats " + images_.file("a.jpg") + " " + images_.file("a.jpg"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("embedded 2 of 2 inputs in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" img/s end to end (decode, preprocessing and inference; batch "), std::string::npos) << r.err;
  EXPECT_EQ(json_lines(r.out).at(0), json_lines(plain.out).at(0));
}

TEST_F(Cli, EmbedHelpNamesEveryPool) {
  const Result r = run_vit("embed --help");
  EXPECT_NE(r.out.find("cls (or timm's token), mean (or avg) or map"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vit::test
