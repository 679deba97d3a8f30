// `vit bench`: throughput and latency of the whole forward pass per batch size, on preprocessed input
// (the model's own work, no image decoding), as a table, JSON lines, CSV and an SVG plot; with --text, of a
// CLIP or SigLIP checkpoint's text tower (tokenizing included), strings/s per batch size.
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "apps/command.h"
#include "apps/options.h"
#include "engine/io/files.h"
#include "apps/output.h"
#include "vit/bench.h"
#include "vit/cpu.h"
#include "vit/error.h"
#include "vit/text.h"
#include "vit/threads.h"

namespace vit::app {
namespace {

struct BenchOptions {
  ModelOptions model;
  std::string batches = "1,2,4,8,16,32", csv, plot;
  double seconds = 3.0;
  int iters = 0, warmup = 3;
  bool json = false, peak = false, profile = false, text = false;
};

struct Row {
  int batch = 0;
  double images_per_sec = 0, ms_p50 = 0, ms_p90 = 0, ms_p99 = 0, gflops = 0, peak_rss_mb = 0;
  int runs = 0;
};

size_t peak_rss_bytes() {
  struct rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return size_t(ru.ru_maxrss) * 1024;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t i = size_t(pos);
  const double f = pos - double(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// A step's name without its block: blocks.3.mlp.fc1 -> mlp.fc1, so a profile sums over the blocks.
std::string step_kind(const std::string& name) {
  return name.rfind("blocks.", 0) == 0 ? name.substr(name.find('.', 7) + 1) : name;
}

// Each precision's matmul peak (matmul_peak), measured once, when first needed.
class Peaks {
 public:
  const MatmulPeak& of(Precision p) {
    auto it = peaks_.find(p);
    if (it == peaks_.end()) it = peaks_.emplace(p, matmul_peak(p)).first;
    return it->second;
  }

 private:
  std::map<Precision, MatmulPeak> peaks_;
};

// What the peak of precision p means on this CPU, when it is not its own instructions' speed.
std::string peak_note(Precision p) {
  const CpuIsa isa = cpu_isa();
  if (p == Precision::BF16 && !isa.bf16)
    return "no bf16 instructions here (" + isa.name + "): oneDNN emulates them, and --precision bf16 is refused";
  if (p == Precision::Int8 && !isa.vnni)
    return "no VNNI here (" + isa.name + "): pairs of u8 x s8 products summed in 16 bits";
  return "";
}

void print_peaks(Peaks& peaks) {
  std::fprintf(stderr, "matmul peaks (3152x768x3072, weights as oneDNN asks, %d threads):\n", set_threads(0));
  const double f32 = peaks.of(Precision::F32).gops;
  for (Precision p : {Precision::F32, Precision::BF16, Precision::Int8}) {
    const MatmulPeak& pk = peaks.of(p);
    const std::string note = peak_note(p);
    std::fprintf(stderr, "  %-4s %8.1f %-7s %.2fx f32  %s%s%s\n", precision_name(p), pk.gops,
                 p == Precision::Int8 ? "GOP/s" : "GFLOP/s", f32 > 0 ? pk.gops / f32 : 0.0, pk.impl.c_str(),
                 note.empty() ? "" : ": ", note.c_str());
  }
}

// Each kind of step's time summed over the blocks, its share of the forward pass, GFLOP/s, how close
// oneDNN's matmuls come to their precision's peak (the time they would take at it over the time they
// took), and the implementations that ran it (oneDNN's kernel names, or host:ISA for our own loops). The
// host steps (attention, norms, quantize and dequantize passes) are reported as time beside them.
void print_profile(const std::vector<Benchmark::StepTime>& steps, int B, Peaks& peaks) {
  std::map<std::string, double> by_kind, flops_by_kind, at_peak;  // at_peak: seconds at the peak
  std::map<std::string, std::set<std::string>> impls, precisions;
  for (const Benchmark::StepTime& st : steps) {
    const std::string kind = step_kind(st.name);
    by_kind[kind] += st.seconds;
    flops_by_kind[kind] += st.flops;
    impls[kind].insert(st.impl);
    if (st.is_product) {
      const double peak = peaks.of(st.product).gops;
      at_peak[kind] += peak > 0 ? st.flops / (peak * 1e9) : 0.0;
      precisions[kind].insert(precision_name(st.product));
    }
  }
  double sum = 0, matmuls = 0, matmuls_at_peak = 0;
  for (const auto& [k, v] : by_kind) sum += v;
  std::fprintf(stderr, "profile, batch %d (all blocks summed):\n  %-22s %9s %6s %9s %11s  %s\n", B, "step", "ms", "%",
               "GFLOP/s", "of peak", "implementation");
  for (const auto& [k, v] : by_kind) {
    std::string names, peak = "";
    for (const std::string& i : impls[k]) names += (names.empty() ? "" : " ") + i;
    if (at_peak.count(k)) {
      std::string ps;
      for (const std::string& p : precisions[k]) ps += (ps.empty() ? "" : "+") + p;
      peak = fmt::format("{:.0f}% {}", 100 * at_peak[k] / v, ps);
      matmuls += v;
      matmuls_at_peak += at_peak[k];
    }
    std::fprintf(stderr, "  %-22s %9.3f %5.1f%% %9.1f %11s  %s\n", k.c_str(), v * 1e3, 100 * v / sum,
                 flops_by_kind[k] > 0 ? flops_by_kind[k] / v / 1e9 : 0.0, peak.c_str(), names.c_str());
  }
  std::fprintf(stderr, "  oneDNN matmuls %.3f ms (%.1f%%) at %.0f%% of their peaks; the rest %.3f ms (%.1f%%)\n",
               matmuls * 1e3, 100 * matmuls / sum, matmuls > 0 ? 100 * matmuls_at_peak / matmuls : 0.0,
               (sum - matmuls) * 1e3, 100 * (sum - matmuls) / sum);
}

Row bench_batch(Benchmark& model, int B, const BenchOptions& o, Peaks& peaks) {
  const Benchmark::Runs runs = model.run(B, o.warmup, o.seconds, o.iters);
  Row r;
  r.batch = B;
  r.runs = int(runs.ms.size());
  r.images_per_sec = double(B) * r.runs / runs.seconds;
  r.ms_p50 = percentile(runs.ms, 0.5);
  r.ms_p90 = percentile(runs.ms, 0.9);
  r.ms_p99 = percentile(runs.ms, 0.99);
  r.gflops = runs.flops * r.runs / runs.seconds / 1e9;
  r.peak_rss_mb = double(peak_rss_bytes()) / (1 << 20);
  if (o.profile) print_profile(model.profile(B, 9), B, peaks);
  return r;
}

// Round tick values covering [0, top]: steps of 1, 2 or 5 times a power of ten, about five of them.
std::vector<double> ticks(double top) {
  const double raw = std::max(top, 1e-9) / 5, mag = std::pow(10, std::floor(std::log10(raw)));
  const double step = (raw / mag < 1.5 ? 1 : raw / mag < 3.5 ? 2 : raw / mag < 7.5 ? 5 : 10) * mag;
  std::vector<double> t;
  for (double v = 0; v < top + step * 0.999; v += step) t.push_back(v);
  return t;
}

std::string number(double v) { return v == std::floor(v) ? fmt::format("{:.0f}", v) : fmt::format("{:.2g}", v); }

// images/s (left axis, blue) and p50 latency per batch (right axis, red) against batch size on a log2
// axis, with round ticks and a grid.
std::string plot_svg(const std::string& title, const std::vector<Row>& rows) {
  const double W = 680, H = 420, L = 70, R = 80, T = 46, Bm = 56;
  double top_ips = 0, top_ms = 0;
  int lo = 30, hi = 0;
  for (const Row& r : rows) {
    top_ips = std::max(top_ips, r.images_per_sec);
    top_ms = std::max(top_ms, r.ms_p50);
    lo = std::min(lo, int(std::floor(std::log2(r.batch))));
    hi = std::max(hi, int(std::ceil(std::log2(r.batch))));
  }
  if (hi <= lo) hi = lo + 1;
  const std::vector<double> t_ips = ticks(top_ips), t_ms = ticks(top_ms);
  const double max_ips = t_ips.back(), max_ms = t_ms.back();
  auto px = [&](double batch) { return L + (std::log2(batch) - lo) / (hi - lo) * (W - L - R); };
  auto py = [&](double v, double top) { return H - Bm - v / top * (H - T - Bm); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"26\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
      W, H, W / 2, title);
  for (double v : t_ips) {  // horizontal grid at the left axis's ticks
    const double y = py(v, max_ips);
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/>\n", L, y, W - R, y);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#1f77b4\">{}</text>\n", L - 6, y + 4,
                     number(v));
  }
  for (double v : t_ms)
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#d62728\">{}</text>\n", W - R + 6, py(v, max_ms) + 4, number(v));
  for (int e = lo; e <= hi; ++e) {  // vertical grid at powers of two
    const double x = px(std::pow(2, e));
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#e4e4e4\"/>\n", x, T, x, H - Bm);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x, H - Bm + 18, 1 << e);
  }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", L, T,
                   W - L - R, H - T - Bm);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">batch size</text>\n", (L + W - R) / 2, H - 16);
  s += fmt::format("<text x=\"18\" y=\"{0}\" transform=\"rotate(-90 18 {0})\" text-anchor=\"middle\" "
                   "fill=\"#1f77b4\">images/s</text>\n",
                   (T + H - Bm) / 2);
  s += fmt::format("<text x=\"{0}\" y=\"{1}\" transform=\"rotate(90 {0} {1})\" text-anchor=\"middle\" "
                   "fill=\"#d62728\">latency per batch, p50 (ms)</text>\n",
                   W - 20, (T + H - Bm) / 2);
  auto series = [&](auto value, double top, const char* color) {
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"", color);
    for (const Row& r : rows) s += fmt::format("{:.1f},{:.1f} ", px(r.batch), py(value(r), top));
    s += "\"/>\n";
    for (const Row& r : rows)
      s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", px(r.batch), py(value(r), top),
                       color);
  };
  series([](const Row& r) { return r.images_per_sec; }, max_ips, "#1f77b4");
  series([](const Row& r) { return r.ms_p50; }, max_ms, "#d62728");
  return s + "</svg>\n";
}

// The outputs, opened before the first timing so that a bad --csv or --plot costs nothing.
struct BenchOutputs {
  std::unique_ptr<OutputFile> csv, plot;
  bool csv_stdout = false;
};

int run_bench(const BenchOptions& o, const std::vector<int>& batches, Benchmark& model, BenchOutputs& out) {
  const std::string name = o.model.model.empty() && !o.model.arch.empty() ? o.model.arch : model.source();
  const int threads = set_threads(0);
  const char* precision = precision_name(model.precision());
  const double weights_mb = double(model.weight_bytes()) / 1e6;
  Peaks peaks;
  if (o.peak) print_peaks(peaks);
  const auto csv_line = [&](const std::string& line) {
    if (out.csv_stdout) std::printf("%s", line.c_str());
    else if (out.csv) out.csv->write(line.data(), line.size());
  };
  csv_line("engine,model,precision,batch,threads,images_per_sec,ms_p50,ms_p90,ms_p99,gflops,peak_rss_mb,weights_mb\n");
  const bool table = !o.json && !out.csv_stdout;
  if (table)
    std::printf("%s, %s (weights %.1f MB), %d threads\n%6s %10s %9s %9s %9s %9s %9s\n", model.summary().c_str(),
                precision, weights_mb, threads, "batch", "img/s", "p50 ms", "p90 ms", "p99 ms", "GFLOP/s", "RSS MB");
  std::vector<Row> rows;
  for (int B : batches) {
    const Row r = bench_batch(model, B, o, peaks);
    rows.push_back(r);
    if (o.json) {
      nlohmann::json j{{"engine", "vit"},         {"model", name},         {"precision", precision},
                       {"weights_mb", weights_mb}, {"batch", r.batch},
                       {"threads", threads},      {"images_per_sec", r.images_per_sec},
                       {"ms_p50", r.ms_p50},      {"ms_p90", r.ms_p90},    {"ms_p99", r.ms_p99},
                       {"gflops", r.gflops},      {"peak_rss_mb", r.peak_rss_mb}, {"runs", r.runs}};
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (table) {
      std::printf("%6d %10.2f %9.2f %9.2f %9.2f %9.1f %9.0f\n", r.batch, r.images_per_sec, r.ms_p50, r.ms_p90, r.ms_p99,
                  r.gflops, r.peak_rss_mb);
    }
    csv_line(fmt::format("vit,{},{},{},{},{},{},{},{},{},{},{}\n", name, precision, r.batch, threads, r.images_per_sec,
                         r.ms_p50, r.ms_p90, r.ms_p99, r.gflops, r.peak_rss_mb, weights_mb));
    check_stdout();
  }
  if (out.csv) out.csv->commit();
  if (out.plot) {
    const std::string svg = plot_svg(fmt::format("{} ({}, {} threads)", model.name(), precision, threads), rows);
    out.plot->write(svg.data(), svg.size());
    out.plot->commit();
  }
  return kExitOk;
}

// --text: each batch of B prompts ("a photo of a tench.", ...: the lengths zero-shot labels have) embedded, tokenizing
// included, timed as the image passes are; strings/s and latency per batch size.
int run_text_bench(const BenchOptions& o, const std::vector<int>& batches, const TextModel& model) {
  static const char* const kNames[] = {"tench", "goldfish", "great white shark", "tiger shark", "hammerhead", "electric ray",
                                       "stingray", "cock", "hen", "ostrich", "brambling", "goldfinch"};
  const int threads = set_threads(0);
  const TextInfo& info = model.info();
  if (!o.json)
    std::printf("%s (%s), %d threads\n%6s %10s %9s %9s %9s\n", info.summary.c_str(), precision_name(o.model.precision),
                threads, "batch", "strings/s", "p50 ms", "p90 ms", "p99 ms");
  for (int B : batches) {
    std::vector<std::string> texts;
    for (int i = 0; i < B; ++i) texts.push_back(std::string("a photo of a ") + kNames[i % 12] + ".");
    for (int i = 0; i < o.warmup; ++i) model.embed(texts);
    std::vector<double> ms;
    const auto start = std::chrono::steady_clock::now();
    double total = 0;
    while (o.iters ? int(ms.size()) < o.iters : total < o.seconds) {
      const auto t0 = std::chrono::steady_clock::now();
      model.embed(texts);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    const double per_sec = double(B) * double(ms.size()) / total;
    if (o.json)
      std::printf("%s\n", nlohmann::json{{"engine", "vit"}, {"model", model_path(o.model)}, {"tower", "text"},
                                         {"precision", precision_name(o.model.precision)}, {"batch", B},
                                         {"threads", threads}, {"strings_per_sec", per_sec},
                                         {"ms_p50", percentile(ms, 0.5)}, {"ms_p90", percentile(ms, 0.9)},
                                         {"ms_p99", percentile(ms, 0.99)}, {"runs", ms.size()}}
                                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    else
      std::printf("%6d %10.2f %9.2f %9.2f %9.2f\n", B, per_sec, percentile(ms, 0.5), percentile(ms, 0.9),
                  percentile(ms, 0.99));
    check_stdout();
  }
  return kExitOk;
}

std::function<int()> prepare_text_bench(const BenchOptions& o, std::shared_ptr<std::vector<int>> batches) {
  if (o.model.model.empty()) throw Error("--text times a model's text tower: give --model (a CLIP or SigLIP checkpoint)");
  if (!o.csv.empty() || !o.plot.empty() || o.peak || o.profile || !o.model.arch.empty() || o.model.img_size)
    throw Error("--csv, --plot, --peak, --profile, --arch and --img-size time image towers, not --text");
  TextOptions to;
  to.precision = o.model.precision;
  to.threads = o.model.threads;
  to.batch = *std::max_element(batches->begin(), batches->end());
  auto model = std::make_shared<TextModel>(model_path(o.model), to);
  return [o, batches, model] { return run_text_bench(o, *batches, *model); };
}

std::function<int()> prepare_bench(const BenchOptions& o) {
  auto batches = std::make_shared<std::vector<int>>(parse_batch_list(o.batches, "--batch"));
  set_threads(usable_threads(o.model.threads));
  if (o.text) return prepare_text_bench(o, batches);
  auto out = std::make_shared<BenchOutputs>();
  if (o.csv == "-" && o.json) throw Error("--csv - and --json both write to stdout: pick one");
  out->csv_stdout = o.csv == "-";
  if (!o.csv.empty() && o.csv != "-") out->csv = std::make_unique<OutputFile>(o.csv);
  if (!o.plot.empty()) out->plot = std::make_unique<OutputFile>(o.plot);
  // --arch alone: that architecture with random weights; with --model, the checkpoint's architecture.
  const bool random = o.model.model.empty() && !o.model.arch.empty();
  if (random && !o.model.config.empty()) throw Error("--config describes a checkpoint: give --model too, or drop it");
  auto model = std::make_shared<Benchmark>(
      random ? Benchmark::random(o.model.arch, o.model.img_size, o.model.precision)
             : Benchmark(model_path(o.model), o.model.config, o.model.img_size, o.model.precision, o.model.arch));
  return [o, batches, model, out] { return run_bench(o, *batches, *model, *out); };
}

}  // namespace

void add_bench_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = add_model_command(app, "bench", "measure forward-pass throughput and latency per batch size", o,
                                    prepare_bench, prepare);
  cmd->get_option("--arch")->description(
      "without --model: a timm architecture with random weights, any that docs/MODELS.md lists as running (e.g. "
      "vit_base_patch16_224, vit_small_patch14_dinov2, vit_so400m_patch14_siglip_378, eva02_base_patch14_448); with "
      "--model: the checkpoint's architecture, as the other commands take it");
  cmd->add_option("-b,--batch", o->batches, "batch sizes, comma separated")->capture_default_str();
  auto* secs = add_number_option(cmd, "--seconds", &o->seconds, 0.001, 1e6, "timed seconds per batch size");
  auto* iters = add_number_option(cmd, "--iters", &o->iters, 1, 1 << 30, "timed runs per batch size (instead of --seconds)");
  secs->excludes(iters);
  add_number_option(cmd, "--warmup", &o->warmup, 0, 1 << 30, "untimed runs first");
  cmd->add_flag("--json", o->json, "one JSON line per batch size");
  cmd->add_option("--csv", o->csv, "also write the rows to a CSV file ('-': to stdout, instead of the table)");
  cmd->add_option("--plot", o->plot, "draw images/s and latency against batch size into an SVG file");
  cmd->add_flag("--text", o->text, "time the model's text tower instead (a CLIP or SigLIP checkpoint's): strings/s per "
                                   "batch size of prompts like 'a photo of a tench.', tokenizing included");
  cmd->add_flag("--peak", o->peak, "also measure the machine's matmul peaks in f32, bf16 and int8");
  cmd->add_flag("--profile", o->profile,
                "print where each batch size's time goes, per step (best of 9 passes), and each matmul's share of its precision's peak");
}

}  // namespace vit::app
