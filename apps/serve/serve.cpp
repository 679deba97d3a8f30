// `vit serve`: its flags, start-up and shutdown. Loads the models (model_flags.h), builds the route table
// (v1.h, openai.h, kserve.h) over the served models (models.h) and the connections (http_server.h), starts
// KServe over gRPC with --grpc-port (grpc_server.h), warms every batch size up, and prints the memory bound. SIGINT, SIGTERM and SIGHUP are taken by one sigwait thread (every other thread
// keeps them blocked): the server stops accepting, answers what it has read, and exits 0; a second SIGINT
// exits at once. With --drain-grace-s, SIGTERM and SIGHUP first make readiness 503 for that long.
#include <malloc.h>
#include <pthread.h>

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <sstream>
#include <future>
#include <thread>

#include "apps/command.h"
#include "apps/options.h"
#include "apps/output.h"
#include "grpc_server.h"
#include "http_server.h"
#include "kserve.h"
#include "model_flags.h"
#include "models.h"
#include "openai.h"
#include "routes.h"
#include "engine/io/files.h"
#include "v1.h"
#include "vit/batcher.h"
#include "vit/limits.h"

namespace vit::app {
namespace {

constexpr int kExitInterrupted = 130;  // a second SIGINT: 128 + SIGINT, as a shell reports it

struct ServeOptions {
  ModelFlags models;
  HttpLimits http;
  int max_batch = 16, max_delay_ms = 0, max_queue = 256, max_queue_mp = 64, max_inputs = 256;
  int64_t max_pixels = 40'000'000;
  std::vector<std::string> cors_origins;  // pages of these origins may call the server ("*": any)
  int grpc_port = -1;     // KServe v2 over gRPC: off unless given
  int drain_grace_s = 0;  // on SIGTERM, not ready for this long while still serving, then the drain
};

// The bound on the server's memory (docs/SERVING.md), in MiB: what it holds when ready (the model, its
// Plans, its threads), the bodies it may hold three times over (read, then parsed into their images), and
// 16 bytes for each pixel of the queued images (the costliest decode, a 16-bit RGBA PNG's).
constexpr int64_t kBodyCopies = 3, kBytesPerPixel = 16;
int64_t memory_bound_mb(int64_t ready_mb, const ServeOptions& o) {
  return ready_mb + kBodyCopies * o.http.max_bodies_mb + (kBytesPerPixel * int64_t(o.max_queue_mp) * 1'000'000 >> 20);
}

// The most memory this process has held so far in MiB (VmHWM, its peak resident set), 0 where /proc
// does not say.
int64_t peak_resident_mb() {
  std::istringstream status;
  try {
    status.str(read_file_head("/proc/self/status", 1 << 16));
  } catch (const Error&) {
    return 0;
  }
  std::string key;
  int64_t kb = 0;
  while (status >> key)
    if (key == "VmHWM:" && status >> kb) return (kb + 1023) >> 10;
  return 0;
}

// The signals the server takes through sigwait; blocked in every thread.
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // a closed terminal, or `systemctl reload`: a drain too (models are fixed at start)
  return set;
}

// An origin as a browser sends it: scheme://host[:port], nothing after; or "*".
void check_origin(const std::string& origin) {
  const size_t sep = origin.find("://");
  const bool ok = origin == "*" ||
                  (sep != std::string::npos && sep > 0 && sep + 3 < origin.size() &&
                   origin.find_first_of("/?#", sep + 3) == std::string::npos &&
                   std::all_of(origin.begin(), origin.end(), [](char c) { return c > ' ' && c < 0x7f; }));
  if (!ok)
    throw Error("--cors-origin '" + origin + "': not an origin; give one as the browser sends it, "
                "scheme://host[:port] (http://localhost:3000), or * for any");
}

void check_options(const ServeOptions& o) {
  for (const std::string& origin : o.cors_origins) check_origin(origin);
  if (o.max_queue < o.max_batch)
    throw Error("--max-queue (" + std::to_string(o.max_queue) + ") must hold at least --max-batch (" +
                std::to_string(o.max_batch) + ") images");
  if (o.http.max_bodies_mb < o.http.max_body_mb)
    throw Error("--max-bodies-mb (" + std::to_string(o.http.max_bodies_mb) + ") must hold at least one body of "
                "--max-body-mb (" + std::to_string(o.http.max_body_mb) + ")");
  if (o.max_pixels > int64_t(o.max_queue_mp) * 1'000'000)
    throw Error("--max-queue-mp (" + std::to_string(o.max_queue_mp) + ") must hold at least one image of --max-pixels (" +
                std::to_string(o.max_pixels) + ")");
}

// One warm-up pass of n images through the model's Batcher: "" when it ran, else why not.
std::string warm_up_pass(const ServedModel& m, int64_t n, int side, const std::vector<uint8_t>& grey) {
  std::promise<std::string> ran;
  bool queued = false;
  if (side > 0) {
    queued = m.batcher->submit(Request::of_images(std::vector<Pixels>(size_t(n), Pixels{"warm-up", side, side, grey.data()}),
                                                  Output::Embedding),
                               [&ran](Answer a) {
                                 std::string error;
                                 for (const Embedding& e : a.embeddings) if (!e.error.empty()) error = e.error;
                                 ran.set_value(error);
                               });
  } else {
    std::vector<float> zeros(size_t(n * 3 * m.info.input_height * m.info.input_width), 0.f);
    queued = m.batcher->submit(Request::of_tensors(std::move(zeros), n, Output::Logits), [&ran](Answer a) { ran.set_value(a.error); });
  }
  if (!queued) return "its queue refused it";
  return ran.get_future().get();
}

// The text tower's largest pass, where the passes run: a batch of texts (its --max-batch) each cut to the whole
// context, so that what a text request holds is counted before the server says it is ready.
void warm_up_text(const ServedModel& m, int max_batch) {
  std::string long_text;
  for (int64_t i = 0; i < m.text->info().context; ++i) long_text += "a photo ";
  std::promise<std::string> ran;
  const bool queued = m.batcher->take_turn([&] {
    try {
      const std::vector<TextEmbedding> es = m.text->embed(std::vector<std::string>(size_t(max_batch), long_text), true);
      ran.set_value(es.front().error);
    } catch (const std::exception& e) {
      ran.set_value(e.what());
    }
  }, max_batch);
  const std::string error = queued ? ran.get_future().get() : "its queue refused it";
  if (!error.empty())
    throw Error("model " + m.name + ": the warm-up pass of its text tower on " + std::to_string(max_batch) +
                " texts failed: " + error);
}

// Runs a forward pass of every batch size the model's Batcher runs (--max-batch and the powers
// of two below it) where its passes run: no request pays for the engine's set-up, and what the process holds
// from here on is the model's, its Plans' and its threads'. A pass that cannot run (its memory, say) stops
// start-up naming the model and the batch.
void warm_up(const ServedModel& m, int max_batch) {
  std::vector<int64_t> sizes{max_batch};
  for (int64_t n = 1; n < max_batch; n *= 2) sizes.push_back(n);
  // A NaFlex model takes images, not a fixed tensor: grey squares whose grid fills most of its budget.
  const int side = m.info.max_patches > 0 ? int(std::sqrt(double(m.info.max_patches)) * double(m.info.patch)) : 0;
  const std::vector<uint8_t> grey(size_t(side) * size_t(side) * 3, 128);
  for (const int64_t n : sizes) {
    std::string error;
    try {
      error = warm_up_pass(m, n, side, grey);
    } catch (const std::bad_alloc&) {  // its input, before it was queued
      error = "out of memory";
    }
    if (!error.empty())
      throw Error("model " + m.name + ": the warm-up pass of a batch of " + std::to_string(n) + " images" +
                  (n == max_batch ? " (--max-batch " + std::to_string(n) + ")" : "") + " failed: " + error);
  }
  if (m.text) warm_up_text(m, max_batch);
}

// Everything the server runs on, made and bound before the work starts so that a busy port is a usage
// error too.
struct Server {
  ServeOptions opt;
  Metrics metrics;
  std::unique_ptr<Service> service;
  std::unique_ptr<Router> router;
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<GrpcServer> grpc;  // with --grpc-port
  // The thread every model loads and runs its passes on, when they take turns on the cores (and with one
  // model); null when --threads splits the cores, each model then with a thread of its own. Either way a
  // model's loading, warm-up, passes and explanations run on one thread, so the process has one OpenMP
  // team per share of the cores (vit::ComputeThread), as `vit embed` has.
  std::shared_ptr<ComputeThread> compute;
  std::atomic<bool> counting{false};  // the warm-up passes are not counted
  std::string address, grpc_address;
};

// The cores this process may run on.
int cores() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : int(std::thread::hardware_concurrency());
}

// Several models take turns on the cores unless their --threads add up to no more than them.
bool take_turns(const std::vector<ModelSpec>& specs) {
  if (specs.size() < 2) return false;
  int threads = 0;
  for (const ModelSpec& s : specs) threads += s.model.threads > 0 ? s.model.threads : cores();
  return threads > cores();
}

// The text tower of a CLIP or SigLIP checkpoint served with its image projection, at the model's precision, on
// the thread its passes run on; a model without one (or whose tower cannot be loaded: said at start-up) answers
// every text with why.
void load_text_tower(const ModelSpec& spec, int batch, ComputeThread& compute, ServedModel* m) {
  const std::string path = model_path(spec.model), about = "model '" + m->name + "' ";
  if (!has_text_tower(path)) {
    m->text_error = about + "has no text tower: it embeds images, not text";
    return;
  }
  // A projection's output is the space both towers share; a tower without a head (SigLIP's) pools into it.
  if (!m->head_embedding && m->info.head != HeadKind::None) {
    m->text_error = about + "is served with its image tower's pre-logits (--embedding pre-logits), not in the space "
                            "of its text tower: serve it without --embedding to embed texts";
    return;
  }
  TextOptions to;
  to.precision = spec.model.precision;
  to.threads = spec.model.threads;
  to.batch = batch;
  try {
    compute.run([&] { m->text = std::make_unique<TextModel>(path, to); });
    if (m->text->info().embedding != m->embedding_size)
      throw Error("its text embeddings are " + std::to_string(m->text->info().embedding) + " wide, its images' " +
                  std::to_string(m->embedding_size));
  } catch (const std::exception& e) {
    m->text.reset();
    m->text_error = about + "has a text tower that cannot be loaded: " + e.what();
    std::fprintf(stderr, "vit serve: warning: %s; it embeds images only\n", m->text_error.c_str());
  }
}

// One model loaded, its batching queue running; a model that cannot be loaded stops start-up naming it.
std::unique_ptr<ServedModel> load(const ModelSpec& spec, const ServeOptions& o, Server* server) {
  ClassifierOptions co = classifier_options(spec.model);
  co.batch = o.max_batch;
  co.keep_logits = true;
  co.max_pixels = o.max_pixels;
  auto m = std::make_unique<ServedModel>();
  m->name = spec.name;
  const std::shared_ptr<ComputeThread> compute = server->compute ? server->compute : std::make_shared<ComputeThread>();
  try {
    compute->run([&] { m->classifier = std::make_unique<Classifier>(load_classifier(spec.model, co)); });
  } catch (const std::exception& e) {
    throw Error("model " + spec.name + ": " + e.what());
  }
  m->info = m->classifier->info();
  m->explain_settings.max_pixels = o.max_pixels;
  m->explain_settings.picture_software = kPngSoftware;
  m->classes = m->classifier->classes();
  m->head_embedding = spec.embedding == EmbeddingChoice::Head ||
                      (spec.embedding == EmbeddingChoice::Default && m->info.head == HeadKind::Projection);
  compute->run([&] { m->embedding_size = m->classifier->embedding_size(m->embed(true)); });
  load_text_tower(spec, o.max_batch, *compute, m.get());
  BatcherOptions bo;
  bo.max_batch = o.max_batch;
  bo.max_delay_ms = o.max_delay_ms;
  bo.max_queue = o.max_queue;
  bo.compute = compute;
  const ServedModel* model = m.get();
  m->batcher = std::make_unique<Batcher>(*m->classifier, bo, [server, model](const BatchStats& s) {
    if (server->counting) server->service->batch_done(*model, s);
  });
  return m;
}

std::unique_ptr<Server> make_server(const ServeOptions& o) {
  const std::vector<ModelSpec> specs = model_specs(o.models);
  auto s = std::make_unique<Server>();
  s->opt = o;
  if (specs.size() < 2 || take_turns(specs)) s->compute = std::make_shared<ComputeThread>();
  s->service = std::make_unique<Service>(ServiceOptions{o.max_batch, o.max_queue, o.max_inputs, o.max_pixels,
                                                        int64_t(o.max_queue_mp) * 1'000'000}, s->metrics);
  for (const ModelSpec& spec : specs) s->service->add(load(spec, o, s.get()));
  std::vector<Route> routes;
  add_v1_routes(*s->service, &routes);
  add_openai_routes(*s->service, &routes);
  add_kserve_routes(*s->service, &routes);
  s->router = std::make_unique<Router>(std::move(routes), s->metrics, o.cors_origins);
  s->http = std::make_unique<HttpServer>(o.http, *s->router);
  const HttpServer* http = s->http.get();
  using Kind = Metrics::Kind;
  s->metrics.read("vit_connections_open", Kind::Gauge, "Connections open now.", {},
                  [http] { return double(http->open_connections()); });
  s->metrics.read("vit_connections_refused_total", Kind::Counter, "Connections refused past --max-connections.", {},
                  [http] { return double(http->refused_connections()); });
  s->metrics.read("vit_body_bytes_held", Kind::Gauge,
                  "Bytes of request bodies held now (read, queued or being answered), at most --max-bodies-mb.", {},
                  [http] { return double(http->bodies().used()); });
  s->address = s->http->listen();
  if (o.grpc_port >= 0) {
    s->grpc = std::make_unique<GrpcServer>(*s->service, s->http->bodies(),
                                           GrpcLimits{o.http.host, o.grpc_port, o.http.max_body_mb, o.http.timeout_s});
    s->grpc_address = s->grpc->listen();
  }
  return s;
}

// The input a model takes, as `vit inspect` says it: a NaFlex model's budget of patches (each image at its own
// aspect ratio), else its fixed input.
std::string input_line(const ModelInfo& info) {
  if (info.max_patches > 0)
    return "NaFlex: each image at its own aspect ratio within " + std::to_string(info.max_patches) + " patches of " +
           std::to_string(info.patch) + " pixels (--max-patches)";
  return std::to_string(info.input_height) + "x" + std::to_string(info.input_width);
}

// SIGTERM or SIGHUP with --drain-grace-s: readiness answers 503 for that long while every request is still
// served, so that a balancer polling it takes the server out before it stops accepting. SIGINT in the
// meantime exits at once; another SIGTERM or SIGHUP cuts the grace short. Returns the signal to drain on.
int drain_grace(Server& s, const sigset_t& signals, int sig) {
  std::fprintf(stderr, "vit serve: %s: not ready for %d s while serving (--drain-grace-s), then draining\n",
               sig == SIGHUP ? "SIGHUP" : "SIGTERM", s.opt.drain_grace_s);
  std::fflush(stderr);
  s.service->drain();
  const timespec grace{s.opt.drain_grace_s, 0};
  const int next = sigtimedwait(&signals, nullptr, &grace);
  if (next == SIGINT) std::_Exit(kExitInterrupted);
  return sig;
}

int run(Server& s) {
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-answer is an error code, not the end of the server
  const ServeOptions& o = s.opt;
  std::string models;
  for (const auto& m : s.service->models()) {
    const std::string answers = m->classes > 0 ? std::to_string(m->classes) + " classes"
                                                : "embeddings of " + std::to_string(m->embedding_size);
    const std::string text = m->text ? ", text tower " + m->text->info().tower + " (" + m->text->info().tokenizer + ")" : "";
    models += (models.empty() ? "model " : ", model ") + m->name + " (" + m->info.file + ", " + m->info.precision + ", " +
              answers + ", " + input_line(m->info) + text + ")";
  }
  std::fprintf(stderr,
               "vit serve: %s at http://%s,%s max batch %d, max delay %d ms, queue %d images and %d MP, body %d MB, "
               "bodies %d MB, image %lld pixels, inputs %d, timeout %d s, %d connections, %d threads%s\n",
               models.c_str(), s.address.c_str(), s.grpc ? (" KServe gRPC at " + s.grpc_address + ",").c_str() : "",
               o.max_batch, o.max_delay_ms, o.max_queue, o.max_queue_mp,
               o.http.max_body_mb, o.http.max_bodies_mb, (long long)o.max_pixels, o.max_inputs, o.http.timeout_s,
               o.http.max_connections, set_threads(0), s.compute && s.service->models().size() > 1 ? ", the models' passes taking turns" : "");
  std::fflush(stderr);
  std::thread connections([&s] { s.http->run(); });
  // The first signal drains; a second SIGINT ends the process at once.
  std::thread waiter([&s] {
    const sigset_t signals = shutdown_signals();
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGINT && s.opt.drain_grace_s > 0) sig = drain_grace(s, signals, sig);
    std::fprintf(stderr, "vit serve: %s: answering the requests already read, then exiting (SIGINT again: now)\n",
                 sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM");
    s.http->stop();
    if (s.grpc) s.grpc->stop();
    for (;;) {
      sigwait(&signals, &sig);
      if (sig == SIGINT) std::_Exit(kExitInterrupted);
    }
  });
  waiter.detach();
  try {
    for (const auto& model : s.service->models()) warm_up(*model, o.max_batch);
  } catch (...) {  // the connections' thread ends before the error does
    s.http->stop();
    connections.join();
    if (s.grpc) s.grpc->stop();
    throw;
  }
  const int64_t ready_mb = peak_resident_mb();
  std::fprintf(stderr, "vit serve: ready; memory: %lld MiB so far, at most %lld MiB under any load (%lld + %lld x "
               "--max-bodies-mb + %lld B x --max-queue-mp: docs/SERVING.md)\n", (long long)ready_mb,
               (long long)memory_bound_mb(ready_mb, o), (long long)ready_mb, (long long)kBodyCopies,
               (long long)kBytesPerPixel);
  std::fflush(stderr);
  s.counting = true;
  for (const auto& model : s.service->models()) model->ready = true;
  connections.join();
  if (s.grpc) s.grpc->wait();
  for (const auto& model : s.service->models()) model->batcher->close();
  std::fprintf(stderr, "vit serve: stopped\n");
  return kExitOk;
}

std::function<int()> prepare_serve(const ServeOptions& o) {
  // Before any thread exists (OpenMP's, oneDNN's, Asio's), so all of them inherit the mask.
  const sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Blocks of 1 MiB and more (decoded images, bodies) come from the system and go back to it when freed:
  // glibc's default would raise that threshold to 32 MiB after the first large free and keep up to twice
  // that, freed, in each thread's arena, where a decoded bomb's memory outlives its request.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
  check_options(o);
  std::shared_ptr<Server> server = make_server(o);
  return [server] { return run(*server); };
}

}  // namespace

void add_serve_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "classify and embed images over HTTP: /v1/classify, /v1/embeddings (OpenAI's), KServe v2, /metrics");
  add_model_flags(cmd, &o->models);
  cmd->add_option("--host", o->http.host, "address to listen on (0.0.0.0: every interface)")->capture_default_str();
  add_number_option(cmd, "--port", &o->http.port, 0, 65535, "port to listen on (0: any free one, printed at start-up)");
  add_number_option(cmd, "--max-inputs", &o->max_inputs, 1, 1 << 20, "inputs of one /v1/embeddings request at most (400 past it)");
  add_number_option(cmd, "--max-batch", &o->max_batch, 1, int(kMaxBatch), "images per forward pass at most");
  add_number_option(cmd, "--max-delay-ms", &o->max_delay_ms, 0, 10000,
                    "after a request arrives, wait this long for others to fill its batch");
  add_number_option(cmd, "--max-queue", &o->max_queue, 1, 1 << 20,
                    "images waiting at most; past it, requests get 503 and Retry-After");
  add_number_option(cmd, "--max-body-mb", &o->http.max_body_mb, 1, 4096, "largest request body, in MiB (413 past it)");
  add_number_option(cmd, "--max-bodies-mb", &o->http.max_bodies_mb, 1, 1 << 20,
                    "request bodies held at once (being read, queued, answered), in MiB; past it, 503 and Retry-After");
  add_number_option(cmd, "--max-pixels", &o->max_pixels, int64_t(1), int64_t(1) << 40,
                    "largest image, in pixels, refused from its header before decoding (400)");
  add_number_option(cmd, "--max-queue-mp", &o->max_queue_mp, 1, 1 << 20,
                    "megapixels the queued images hold at most (from their headers, until answered); past it, 503 "
                    "and Retry-After");
  add_number_option(cmd, "--timeout-s", &o->http.timeout_s, 1, 86400,
                    "total time for one request: reading it, answering it and writing the answer");
  add_number_option(cmd, "--max-connections", &o->http.max_connections, 1, 1 << 20,
                    "open connections at most; past it, a new one is answered only for health checks and /metrics, "
                    "anything else gets 503, and it is closed");
  cmd->add_option("--cors-origin", o->cors_origins,
                  "ORIGIN whose pages may call the server from a browser (scheme://host[:port], or * for any); "
                  "repeat for several. Off by default: only pages the server answers itself")
      ->type_name("ORIGIN");
  add_number_option(cmd, "--http-threads", &o->http.threads, 1, 64, "threads reading and writing HTTP");
  add_number_option(cmd, "--grpc-port", &o->grpc_port, 0, 65535,
                    "also serve KServe v2 over gRPC on this port (0: any free one, printed at start-up); off unless given");
  add_number_option(cmd, "--drain-grace-s", &o->drain_grace_s, 0, 3600,
                    "on SIGTERM, answer /v2/health/ready with 503 for this long while still serving, then drain (give "
                    "it more than a balancer's check interval times its fall count)");
  cmd->callback([o, prepare] { *prepare = [o] { return prepare_serve(*o); }; });
}

}  // namespace vit::app
