// vit::Batcher on a tiny random model: each request's answers equal the Classifier's for its images alone,
// however requests share batches; a request that does not fit the queue is refused at once, queueing
// nothing; close() answers everything queued; embeddings of tensors are the Classifier's and work of the
// caller's own runs alone in its turn; batchers sharing a ComputeThread run their passes on it; requests no
// longer wanted when their turn comes are dropped unrun; bad options and a wrongly sized tensor are errors.
#include <gtest/gtest.h>
#include <stb/stb_image_write.h>  // implementation: stb_image_write.cpp

#include <atomic>
#include <fstream>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "test_util.h"
#include "vit/batcher.h"
#include "vit/request.h"

namespace vit::test {
namespace {

std::string jpeg(int w, int h, uint8_t seed) {
  std::vector<uint8_t> px(size_t(w * h * 3));
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 7 + seed * 31);
  std::string out;
  stbi_write_jpg_to_func([](void* ctx, void* data, int n) { static_cast<std::string*>(ctx)->append((char*)data, size_t(n)); },
                         &out, w, h, 3, px.data(), 90);
  return out;
}

class BatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_tiny_model(dir_.path(), TinySpec{});
    ClassifierOptions o;
    o.batch = 4;
    o.threads = 1;
    o.keep_logits = true;
    classifier_ = std::make_unique<Classifier>(dir_.path(), o);
  }
  TempDir dir_;
  std::unique_ptr<Classifier> classifier_;
};

using EncodedImages = std::vector<std::pair<std::string, std::string>>;

// A request for the top k classes of encoded images.
Request top(EncodedImages images, int k) { return Request::of_images(std::move(images), Output::Top).with_topk(k); }

TEST_F(BatcherTest, AnswersEqualTheClassifierAloneWhateverSharesTheBatch) {
  std::vector<std::pair<std::string, std::string>> images;
  for (int i = 0; i < 12; ++i) images.emplace_back("im" + std::to_string(i), jpeg(20 + i, 30, uint8_t(i)));
  images.emplace_back("broken", "not an image");
  std::vector<Result> alone;
  for (const auto& im : images) alone.push_back(classifier_->classify_encoded({im}, 3)[0]);
  BatcherOptions bo;
  bo.max_batch = 4;
  bo.max_delay_ms = 20;  // so that requests from the threads below share batches
  std::atomic<int64_t> batches{0}, batched{0};
  Batcher b(*classifier_, bo, [&](const BatchStats& s) { ++batches, batched += s.images; });
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Result> got(images.size());
  size_t answered = 0;
  std::vector<std::thread> clients;
  for (size_t i = 0; i < images.size(); ++i)
    clients.emplace_back([&, i] {
      ASSERT_TRUE(b.submit(top({images[i]}, 1 + int(i % 3)), [&, i](Answer a) {
        std::lock_guard<std::mutex> lock(mu);
        got[i] = a.results.at(0);
        ++answered;
        cv.notify_all();
      }));
    });
  for (auto& t : clients) t.join();
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return answered == images.size(); }));
  EXPECT_EQ(batched, int64_t(images.size()));
  EXPECT_LT(batches, int64_t(images.size()));  // some requests shared a forward pass
  for (size_t i = 0; i < images.size(); ++i) {
    EXPECT_EQ(got[i].file, images[i].first);
    EXPECT_EQ(got[i].error, alone[i].error);
    ASSERT_EQ(got[i].top.size(), alone[i].error.empty() ? size_t(1 + i % 3) : 0u) << i;
    for (size_t k = 0; k < got[i].top.size(); ++k) {
      EXPECT_EQ(got[i].top[k].index, alone[i].top[k].index);
      EXPECT_NEAR(got[i].top[k].prob, alone[i].top[k].prob, 1e-6);
    }
    if (alone[i].error.empty()) EXPECT_LE(max_abs_diff(got[i].logits, alone[i].logits), 1e-5f);
  }
}

TEST_F(BatcherTest, AFullQueueRefusesAtOnceAndCloseAnswersWhatWasQueued) {
  BatcherOptions bo;
  bo.max_batch = 4;
  bo.max_queue = 4;
  bo.max_delay_ms = 10000;  // below max_batch images nothing runs until close(): the queue stays as filled
  Batcher b(*classifier_, bo);
  std::atomic<int> answered{0};
  const std::string im = jpeg(16, 16, 1);
  auto done = [&](Answer a) { answered += int(a.results.size()); };
  ASSERT_TRUE(b.submit(top({{"a", im}, {"b", im}}, 1), done));
  EXPECT_FALSE(b.submit(top({{"c", im}, {"d", im}, {"e", im}}, 1), done));  // 5 > 4: refused whole
  EXPECT_EQ(b.queued(), 2);
  const int64_t per = 3 * 32 * 32;
  ASSERT_TRUE(b.submit(Request::of_tensors(std::vector<float>(size_t(per), 0.f), 1, Output::Logits), [&](Answer a) {
    EXPECT_EQ(a.error, "");
    EXPECT_EQ(a.rows.size(), 10u);
    ++answered;
  }));
  EXPECT_FALSE(b.submit(top({{"e", im}, {"f", im}}, 1), done));
  EXPECT_EQ(b.queued(), 3);
  b.close();
  EXPECT_EQ(answered, 3);
  EXPECT_FALSE(b.submit(top({{"g", im}}, 1), done));  // closed
}

TEST_F(BatcherTest, TensorEmbeddingsEqualTheClassifiersAndWorkRunsAloneInItsTurn) {
  BatcherOptions bo;
  bo.max_batch = 4;
  bo.max_delay_ms = 10000;  // until 4 images wait: the requests below queue up, then run in order
  bo.compute = std::make_shared<ComputeThread>();
  std::thread::id compute_thread;
  bo.compute->run([&] { compute_thread = std::this_thread::get_id(); });
  std::atomic<int> passes{0}, on_compute{0};
  Batcher b(*classifier_, bo, [&](const BatchStats&) {
    ++passes;
    if (std::this_thread::get_id() == compute_thread) ++on_compute;
  });
  const int64_t per = 3 * 32 * 32;
  std::vector<float> pixels(size_t(2 * per));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = float(i % 17) / 17.f - 0.5f;
  EmbedOptions eo;
  eo.normalize = true;
  const std::vector<float> want = classifier_->embeddings(pixels.data(), 2, eo);
  std::vector<std::string> order;  // the batching thread's, read after close()
  ASSERT_TRUE(b.submit(Request::of_tensors(pixels, 2, Output::Embedding).with_embed(eo), [&](Answer a) {
    EXPECT_EQ(a.error, "");
    EXPECT_EQ(a.rows, want);
    order.push_back("embeddings");
  }));
  ASSERT_TRUE(b.take_turn([&] { order.push_back("work"); }, 1));
  ASSERT_TRUE(b.submit(Request::of_tensors(pixels, 2, Output::Logits), [&](Answer a) {
    EXPECT_EQ(a.error, "");
    EXPECT_EQ(a.rows, classifier_->logits(pixels.data(), 2));
    order.push_back("logits");
  }));
  b.close();
  // The work shared no pass: three passes, each on the compute thread.
  EXPECT_EQ(order, (std::vector<std::string>{"embeddings", "work", "logits"}));
  EXPECT_EQ(passes, 3);
  EXPECT_EQ(on_compute, 3);
}

// Two batchers sharing a ComputeThread run every pass on it, one at a time, each answer still the
// Classifier's; what work throws reaches the caller of run(), and run() from the thread itself runs at once.
TEST_F(BatcherTest, BatchersSharingAComputeThreadRunTheirPassesOnItOneAtATime) {
  auto compute = std::make_shared<ComputeThread>();
  std::thread::id compute_thread;
  compute->run([&] { compute_thread = std::this_thread::get_id(); });
  EXPECT_NE(compute_thread, std::this_thread::get_id());
  expect_error([&] { compute->run([] { throw Error("thrown on the compute thread"); }); }, "thrown on the compute thread");
  bool inner = false;
  compute->run([&] { compute->run([&] { inner = std::this_thread::get_id() == compute_thread; }); });
  EXPECT_TRUE(inner);

  BatcherOptions bo;
  bo.max_batch = 4;
  bo.compute = compute;
  std::atomic<int> running{0}, overlapped{0}, elsewhere{0};
  const auto on_batch = [&](const BatchStats&) {
    if (std::this_thread::get_id() != compute_thread) ++elsewhere;
  };
  Batcher a(*classifier_, bo, on_batch), b(*classifier_, bo, on_batch);
  const std::string im = jpeg(24, 24, 3);
  const Result want = classifier_->classify_encoded({{"x", im}}, 2)[0];
  std::atomic<int> answered{0};
  for (int i = 0; i < 6; ++i)
    for (Batcher* batcher : {&a, &b}) {
      ASSERT_TRUE(batcher->submit(top({{"x", im}}, 2), [&](Answer a) {
        const std::vector<Result>& rs = a.results;
        ASSERT_EQ(rs.size(), 1u);
        EXPECT_EQ(rs[0].error, "");
        EXPECT_EQ(rs[0].logits, want.logits);
        ++answered;
      }));
      ASSERT_TRUE(batcher->take_turn([&] {
        if (running++ > 0) ++overlapped;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        --running;
      }, 1));
    }
  a.close();
  b.close();
  EXPECT_EQ(answered, 12);
  EXPECT_EQ(overlapped, 0);
  EXPECT_EQ(elsewhere, 0);
}

TEST_F(BatcherTest, RequestsNoLongerWantedAtTheirTurnAreDroppedUnrun) {
  BatcherOptions bo;
  bo.max_batch = 8;
  bo.max_delay_ms = 10000;  // nothing runs until close(): every request is looked at when its turn comes
  std::atomic<int64_t> ran{0};
  Batcher b(*classifier_, bo, [&](const BatchStats& s) { ran += s.images; });
  const std::string im = jpeg(16, 16, 1);
  std::atomic<bool> first_wanted{true}, asked{false};
  std::vector<Result> kept, gone;
  std::vector<Embedding> gone_embeddings;
  std::string gone_rows_error = "unanswered";
  ASSERT_TRUE(b.submit(top({{"a", im}, {"b", im}}, 1), [&](Answer a) { kept = std::move(a.results); },
                       [&] { return asked = true, first_wanted.load(); }));
  ASSERT_TRUE(b.submit(top({{"c", im}}, 1), [&](Answer a) { gone = std::move(a.results); }, [] { return false; }));
  ASSERT_TRUE(b.submit(Request::of_images(EncodedImages{{"d", im}}, Output::Embedding),
                       [&](Answer a) { gone_embeddings = std::move(a.embeddings); }, [] { return false; }));
  ASSERT_TRUE(b.submit(Request::of_tensors(std::vector<float>(size_t(3 * 32 * 32), 0.f), 1, Output::Logits),
                       [&](Answer a) { gone_rows_error = a.rows.empty() ? a.error : ""; }, [] { return false; }));
  EXPECT_EQ(b.queued(), 5);
  EXPECT_FALSE(asked);  // asked at the request's turn, not before
  b.close();
  EXPECT_TRUE(asked);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].error, "");
  EXPECT_EQ(kept[0].top.size(), 1u);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].file, "c");
  EXPECT_EQ(gone[0].error, Batcher::kDropped);
  ASSERT_EQ(gone_embeddings.size(), 1u);
  EXPECT_EQ(gone_embeddings[0].error, Batcher::kDropped);
  EXPECT_TRUE(gone_embeddings[0].embedding.empty());
  EXPECT_EQ(gone_rows_error, Batcher::kDropped);
  EXPECT_EQ(ran, 2);  // only the wanted request's images went through a pass
  EXPECT_EQ(b.dropped(), 3);
  EXPECT_EQ(b.queued(), 0);
}

TEST_F(BatcherTest, BadOptionsAndTensorsAreErrors) {
  BatcherOptions bo;
  bo.max_batch = 0;
  expect_error([&] { Batcher b(*classifier_, bo); }, "max_batch must be at least 1");
  bo.max_batch = 8;
  bo.max_queue = 4;
  expect_error([&] { Batcher b(*classifier_, bo); }, "max_queue (4) must hold at least max_batch (8)");
  Batcher b(*classifier_, BatcherOptions{});
  expect_error([&] { b.submit(Request::of_tensors(std::vector<float>(5), 1, Output::Logits), [](Answer) {}); },
               "5 floats for 1 images of 3072");
  expect_error([&] { b.submit(Request::of_tensors(std::vector<float>(3072), 1, Output::Top), [](Answer) {}); },
               "the top classes are asked of images");
}

// Classifier::run answers each input kind and output as the Classifier's method for it does, and refuses
// what its inputs cannot give.
TEST_F(BatcherTest, RunAnswersAsTheMethodForItsKindAndOutput) {
  const std::string im = jpeg(24, 20, 5);
  const EncodedImages encoded{{"x", im}, {"bad", "not an image"}};
  Answer a = classifier_->run(top(encoded, 2));
  const std::vector<Result> want = classifier_->classify_encoded(encoded, 2);
  ASSERT_EQ(a.results.size(), 2u);
  EXPECT_EQ(a.results[0].top[1].index, want[0].top[1].index);
  EXPECT_EQ(a.results[0].logits, want[0].logits);
  EXPECT_EQ(a.results[1].error, want[1].error);
  EXPECT_TRUE(a.embeddings.empty());
  const std::vector<uint8_t> rgb(16 * 12 * 3, 90);
  const std::vector<Pixels> pixels{{"p", 16, 12, rgb.data()}};
  EmbedOptions eo;
  eo.head = true;
  a = classifier_->run(Request::of_images(pixels, Output::Embedding).with_embed(eo));
  ASSERT_EQ(a.embeddings.size(), 1u);
  EXPECT_EQ(a.embeddings[0].embedding, classifier_->embed_pixels(pixels, eo)[0].embedding);
  const std::vector<float> tensors(size_t(2 * 3 * 32 * 32), 0.125f);
  a = classifier_->run(Request::of_tensors(tensors, 2, Output::Logits));
  EXPECT_EQ(a.rows, classifier_->logits(tensors.data(), 2));
  expect_error([&] { classifier_->run(Request::of_images(encoded, Output::Logits)); }, "logits are asked of tensors");
  expect_error([&] { classifier_->run(Request::of_tensors(tensors, 3, Output::Logits)); }, "6144 floats for 3 images of 3072");
}

// Output::Attention: the Explanations an Explainer over the same Model draws, as the request asks; asked of
// anything but image files and encoded images, refused. Texts go to a TextModel; a Batcher refuses videos, texts
// and attention.
TEST_F(BatcherTest, RunExplainsAttentionOverTheSameModel) {
  const EncodedImages encoded{{"x", jpeg(24, 20, 5)}, {"bad", "not an image"}};
  const Answer a = classifier_->run(Request::of_images(encoded, Output::Attention).with_picture(ExplainMethod::Last, 64));
  ExplainerSettings s;
  s.method = ExplainMethod::Last;
  s.picture_size = 64;
  const std::vector<Explanation> want = Explainer(classifier_->model(), s).explain_encoded(encoded);
  ASSERT_EQ(a.explanations.size(), 2u);
  EXPECT_EQ(a.explanations[0].top.index, want[0].top.index);
  EXPECT_EQ(a.explanations[0].rollout, want[0].rollout);
  EXPECT_EQ(a.explanations[0].last, want[0].last);
  EXPECT_EQ(a.explanations[0].picture, want[0].picture);
  EXPECT_EQ(a.explanations[1].error, want[1].error);
  EXPECT_FALSE(a.explanations[1].error.empty());
  const std::string path = dir_.file("x.jpg");
  {
    std::ofstream f(path, std::ios::binary);
    f << encoded[0].second;
  }
  const Answer files = classifier_->run(Request::of_files({path, dir_.file("missing.jpg")}, Output::Attention));
  ASSERT_EQ(files.explanations.size(), 2u);
  EXPECT_EQ(files.explanations[0].rollout, Explainer(classifier_->model()).explain_encoded({{path, encoded[0].second}})[0].rollout);
  EXPECT_FALSE(files.explanations[1].error.empty());
  // Between batches the caller may stop it, as every long call (more images than a batch of maps holds).
  const EncodedImages many(64, encoded[0]);
  int asked = 0;
  EXPECT_THROW(classifier_->run(Request::of_images(many, Output::Attention), [&] { return ++asked < 0; }), Interrupted);
  EXPECT_EQ(asked, 1);
  expect_error([&] { classifier_->run(Request::of_images(encoded, Output::Attention).with_picture(ExplainMethod::Last, 10)); },
               "picture size 10 is out of range (64 to 8192)");
  const std::vector<uint8_t> rgb(16 * 12 * 3, 90);
  expect_error([&] { classifier_->run(Request::of_images(std::vector<Pixels>{{"p", 16, 12, rgb.data()}}, Output::Attention)); },
               "attention is explained of image files or encoded images");
  expect_error([&] { classifier_->run(Request::of_texts({"a cat"})); }, "texts go to the text tower");
  expect_error([&] { classifier_->run(Request::of_texts({"a cat"}, Output::Top)); }, "texts are asked for their embeddings");
  Batcher b(*classifier_, BatcherOptions{});
  for (Request r : {Request::of_images(encoded, Output::Attention), Request::of_video("clip.mp4", Output::Top),
                    Request::of_texts({"a cat"})})
    expect_error([&] { b.submit(std::move(r), [](Answer) {}); }, "a Batcher batches images and tensors");
}

// The one check both run and submit make: what a request's inputs cannot give, and tensors of another size.
TEST(Request, CheckRefusesWhatItsInputsCannotGive) {
  EXPECT_NO_THROW(check_request(Request::of_tensors(std::vector<float>(24), 2, Output::Logits), 12));
  EXPECT_NO_THROW(check_request(Request::of_files({"a.jpg"}, Output::Top), 12));
  expect_error([] { check_request(Request::of_tensors(std::vector<float>(23), 2, Output::Logits), 12); },
               "23 floats for 2 images of 12");
  expect_error([] { check_request(Request::of_tensors({}, -1, Output::Embedding), 12); }, "a request of -1 tensors");
  expect_error([] { check_request(Request::of_tensors(std::vector<float>(12), 1, Output::Top), 12); },
               "the top classes are asked of images");
  expect_error([] { check_request(Request::of_files({"a.jpg"}, Output::Logits), 12); }, "logits are asked of tensors");
  expect_error([] { check_request(Request::of_video("a.mp4", Output::Logits), 12); }, "logits are asked of tensors");
  expect_error([] { check_request(Request::of_texts({"a cat"}, Output::Top), 12); }, "texts are asked for their embeddings");
  expect_error([] { check_request(Request::of_tensors(std::vector<float>(12), 1, Output::Attention), 12); },
               "attention is explained of image files or encoded images");
}

}  // namespace
}  // namespace vit::test
