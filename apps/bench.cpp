// `vit bench`: throughput and latency of the whole forward pass per batch size, on preprocessed input
// (the model's own work, no image decoding), as a table, JSON lines, CSV and an SVG plot.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common.h"
#include "vit/error.h"

namespace vit::app {
namespace {

struct BenchOptions {
  ModelOptions model;
  std::string arch, batches = "1,2,4,8,16,32", csv, plot;
  double seconds = 3.0;
  int iters = 0, warmup = 3;
  bool json = false, peak = false, profile = false;
};

struct Row {
  int batch = 0;
  double images_per_sec = 0, ms_p50 = 0, ms_p90 = 0, ms_p99 = 0, gflops = 0, peak_rss_mb = 0;
  int runs = 0;
};

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t i = size_t(pos);
  const double f = pos - double(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

using Clock = std::chrono::steady_clock;

// A step's name without its block: blocks.3.mlp.fc1 -> mlp.fc1, so a profile sums over the blocks.
std::string step_kind(const std::string& name) {
  return name.rfind("blocks.", 0) == 0 ? name.substr(name.find('.', 7) + 1) : name;
}

Row bench_batch(ViT& model, int B, const BenchOptions& o) {
  const ViT::Plan& plan = model.plan(B);
  const Program& prog = plan.program();
  float* in = plan.input();
  const size_t n = size_t(B * model.config().input_floats());
  uint32_t s = 12345;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    in[i] = float(int32_t(s)) / 2147483648.f * 2.f;
  }
  for (int i = 0; i < o.warmup; ++i) prog.run();
  std::vector<double> lat;
  lat.reserve(size_t(o.iters > 0 ? o.iters : 100000));
  const auto t0 = Clock::now();
  for (;;) {
    const auto a = Clock::now();
    prog.run();
    const auto b = Clock::now();
    lat.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    if (o.iters > 0 ? int(lat.size()) >= o.iters : std::chrono::duration<double>(b - t0).count() >= o.seconds) break;
  }
  const double total = std::chrono::duration<double>(Clock::now() - t0).count();
  Row r;
  r.batch = B;
  r.runs = int(lat.size());
  r.images_per_sec = double(B) * r.runs / total;
  r.ms_p50 = percentile(lat, 0.5);
  r.ms_p90 = percentile(lat, 0.9);
  r.ms_p99 = percentile(lat, 0.99);
  r.gflops = prog.flops() * r.runs / total / 1e9;
  r.peak_rss_mb = double(peak_rss_bytes()) / (1 << 20);
  if (o.profile) {
    std::map<std::string, double> by_kind;
    std::map<std::string, double> flops_by_kind;
    const int reps = 5;
    for (int rep = 0; rep < reps; ++rep)
      for (const auto& [name, sec] : prog.profile()) by_kind[step_kind(name)] += sec / reps;
    for (const Step& st : prog.steps()) flops_by_kind[step_kind(st.name)] += st.flops;
    double sum = 0;
    for (const auto& [k, v] : by_kind) sum += v;
    std::fprintf(stderr, "profile, batch %d (all blocks summed):\n  %-22s %9s %6s %9s\n", B, "step", "ms", "%", "GFLOP/s");
    for (const auto& [k, v] : by_kind)
      std::fprintf(stderr, "  %-22s %9.3f %5.1f%% %9.1f\n", k.c_str(), v * 1e3, 100 * v / sum,
                   flops_by_kind[k] > 0 ? flops_by_kind[k] / v / 1e9 : 0.0);
  }
  return r;
}

void write_svg(const std::string& path, const std::string& title, const std::vector<Row>& rows) {
  const double W = 640, H = 400, L = 70, R = 70, T = 40, Bm = 50;
  double max_ips = 0, max_ms = 0;
  for (const auto& r : rows) {
    max_ips = std::max(max_ips, r.images_per_sec);
    max_ms = std::max(max_ms, r.ms_p50);
  }
  max_ips *= 1.15;
  max_ms *= 1.15;
  const size_t n = rows.size();
  auto px = [&](size_t i) { return L + (n > 1 ? double(i) / double(n - 1) : 0.5) * (W - L - R); };
  auto py = [&](double v, double mx) { return H - Bm - (mx > 0 ? v / mx : 0) * (H - T - Bm); };
  std::ofstream out(path);
  if (!out) throw Error(path + ": cannot open for writing");
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" << title << "</text>\n"
      << "<line x1=\"" << L << "\" y1=\"" << H - Bm << "\" x2=\"" << W - R << "\" y2=\"" << H - Bm << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - Bm << "\" stroke=\"#1f77b4\"/>\n"
      << "<line x1=\"" << W - R << "\" y1=\"" << T << "\" x2=\"" << W - R << "\" y2=\"" << H - Bm << "\" stroke=\"#d62728\"/>\n";
  for (int t = 0; t <= 4; ++t) {
    const double f = t / 4.0, y = H - Bm - f * (H - T - Bm);
    out << "<text x=\"" << L - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\" fill=\"#1f77b4\">"
        << fmt::format("{:.1f}", f * max_ips) << "</text>\n"
        << "<text x=\"" << W - R + 6 << "\" y=\"" << y + 4 << "\" fill=\"#d62728\">" << fmt::format("{:.1f}", f * max_ms)
        << "</text>\n";
  }
  for (size_t i = 0; i < n; ++i)
    out << "<text x=\"" << px(i) << "\" y=\"" << H - Bm + 18 << "\" text-anchor=\"middle\">" << rows[i].batch << "</text>\n";
  out << "<text x=\"" << W / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">batch size</text>\n"
      << "<text x=\"16\" y=\"" << H / 2 << "\" transform=\"rotate(-90 16 " << H / 2
      << ")\" text-anchor=\"middle\" fill=\"#1f77b4\">images/s</text>\n"
      << "<text x=\"" << W - 14 << "\" y=\"" << H / 2 << "\" transform=\"rotate(90 " << W - 14 << " " << H / 2
      << ")\" text-anchor=\"middle\" fill=\"#d62728\">latency per batch, p50 (ms)</text>\n";
  auto series = [&](auto value, double mx, const char* color) {
    out << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
    for (size_t i = 0; i < n; ++i) out << px(i) << "," << py(value(rows[i]), mx) << " ";
    out << "\"/>\n";
    for (size_t i = 0; i < n; ++i)
      out << "<circle cx=\"" << px(i) << "\" cy=\"" << py(value(rows[i]), mx) << "\" r=\"3\" fill=\"" << color << "\"/>\n";
  };
  series([](const Row& r) { return r.images_per_sec; }, max_ips, "#1f77b4");
  series([](const Row& r) { return r.ms_p50; }, max_ms, "#d62728");
  out << "</svg>\n";
}

int run_bench(const BenchOptions& o, const std::vector<int>& batches, ViT& model) {
  const std::string name = o.arch.empty() ? model.source() : o.arch;
  const int threads = set_threads(0);
  const char* precision = precision_name(model.precision());
  const double weights_mb = double(model.weight_bytes()) / 1e6;
  if (o.peak) std::fprintf(stderr, "f32 matmul peak (3152x768x3072): %.1f GFLOP/s\n", matmul_peak_gflops());
  std::ofstream csv;
  if (!o.csv.empty()) {
    csv.open(o.csv);
    if (!csv) throw Error(o.csv + ": cannot open for writing");
    csv << "engine,model,precision,batch,threads,images_per_sec,ms_p50,ms_p90,ms_p99,gflops,peak_rss_mb,weights_mb\n";
  }
  if (!o.json)
    std::printf("%s, %s (weights %.1f MB), %d threads\n%6s %10s %9s %9s %9s %9s %9s\n", model.config().summary().c_str(), precision, weights_mb, threads, "batch",
                "img/s", "p50 ms", "p90 ms", "p99 ms", "GFLOP/s", "RSS MB");
  std::vector<Row> rows;
  for (int B : batches) {
    const Row r = bench_batch(model, B, o);
    rows.push_back(r);
    if (o.json) {
      nlohmann::json j{{"engine", "vit"},         {"model", name},         {"precision", precision},
                       {"weights_mb", weights_mb}, {"batch", r.batch},
                       {"threads", threads},      {"images_per_sec", r.images_per_sec},
                       {"ms_p50", r.ms_p50},      {"ms_p90", r.ms_p90},    {"ms_p99", r.ms_p99},
                       {"gflops", r.gflops},      {"peak_rss_mb", r.peak_rss_mb}, {"runs", r.runs}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%6d %10.2f %9.2f %9.2f %9.2f %9.1f %9.0f\n", r.batch, r.images_per_sec, r.ms_p50, r.ms_p90, r.ms_p99,
                  r.gflops, r.peak_rss_mb);
    }
    std::fflush(stdout);
    if (csv.is_open())
      csv << "vit," << name << "," << precision << "," << r.batch << "," << threads << "," << r.images_per_sec << "," << r.ms_p50 << ","
          << r.ms_p90 << "," << r.ms_p99 << "," << r.gflops << "," << r.peak_rss_mb << "," << weights_mb << "\n";
  }
  if (!o.plot.empty()) write_svg(o.plot, name + " (" + std::to_string(threads) + " threads)", rows);
  return kExitOk;
}

}  // namespace

std::function<int()> prepare_bench(const BenchOptions& o) {
  auto batches = std::make_shared<std::vector<int>>(parse_batch_list(o.batches, "--batch"));
  if (!o.arch.empty() && !o.model.model.empty()) throw Error("--arch and --model exclude each other: pick one");
  set_threads(o.model.threads);
  auto model = std::make_shared<ViT>(o.arch.empty() ? load_model(o.model) : ViT::random(config_for_arch(o.arch), 0, o.model.precision));
  return [o, batches, model] { return run_bench(o, *batches, *model); };
}

void add_bench_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "measure forward-pass throughput and latency per batch size");
  add_model_options(cmd, &o->model);
  cmd->add_option("--arch", o->arch, "a standard shape with random weights, e.g. vit_base_patch16_224");
  cmd->add_option("--batch", o->batches, "batch sizes, comma separated")->capture_default_str();
  auto* secs = cmd->add_option("--seconds", o->seconds, "timed seconds per batch size")->check(CLI::PositiveNumber)
                   ->capture_default_str();
  auto* iters = cmd->add_option("--iters", o->iters, "timed runs per batch size (instead of --seconds)")
                    ->check(CLI::PositiveNumber);
  secs->excludes(iters);
  cmd->add_option("--warmup", o->warmup, "untimed runs first")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON line per batch size");
  cmd->add_option("--csv", o->csv, "also write the rows to a CSV file");
  cmd->add_option("--plot", o->plot, "draw images/s and latency against batch size into an SVG file");
  cmd->add_flag("--peak", o->peak, "also measure the machine's f32 matmul peak");
  cmd->add_flag("--profile", o->profile, "print where each batch size's time goes, per step");
  cmd->callback([o, prepare] { *prepare = [o] { return prepare_bench(*o); }; });
}

}  // namespace vit::app
