// The metrics registry of metrics.h and its Prometheus text: label values escaped, histograms cumulative
// with their +Inf bucket, numbers printed to full precision.
#include "metrics.h"

#include <cstdio>
#include <stdexcept>

namespace vit::app {

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// `a="x",b="y"`, with extra (`le="0.5"`) after the labels.
std::string label_text(const Labels& labels, const std::string& extra = "") {
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ",") + k + "=\"" + escape(v) + "\"";
  if (!extra.empty()) out += (out.empty() ? "" : ",") + extra;
  return out;
}

std::string braces(const std::string& labels) { return labels.empty() ? "" : "{" + labels + "}"; }

}  // namespace

Metrics::Family& Metrics::family(const std::string& name, Kind kind) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    order_.push_back(name);
    it = families_.emplace(name, Family{}).first;
    it->second.kind = kind;
  }
  if (it->second.kind != kind) throw std::logic_error("metric " + name + " declared twice, as two kinds");
  return it->second;
}

void Metrics::counter(const std::string& name, const std::string& help) {
  std::lock_guard<std::mutex> lock(mu_);
  family(name, Kind::Counter).help = help;
}

void Metrics::histogram(const std::string& name, const std::string& help, std::vector<double> bounds) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name, Kind::Histogram);
  f.help = help;
  f.bounds = std::move(bounds);
}

void Metrics::read(const std::string& name, Kind kind, const std::string& help, const Labels& labels,
                   std::function<double()> read) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name, kind);
  f.help = help;
  f.reads.emplace_back(labels, std::move(read));
}

void Metrics::start(const std::string& name, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = families_.at(name);
  if (f.kind != Kind::Histogram) {
    f.values[labels] += 0;
  } else if (Histogram& h = f.histograms[labels]; h.counts.empty()) {
    h.counts.assign(f.bounds.size() + 1, 0);
  }
}

void Metrics::add(const std::string& name, const Labels& labels, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  families_.at(name).values[labels] += v;
}

void Metrics::observe(const std::string& name, const Labels& labels, double v) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = families_.at(name);
  Histogram& h = f.histograms[labels];
  if (h.counts.empty()) h.counts.assign(f.bounds.size() + 1, 0);
  size_t i = 0;
  while (i < f.bounds.size() && v > f.bounds[i]) ++i;
  ++h.counts[i];
  h.sum += v;
  ++h.count;
}

std::string Metrics::text() const {
  std::lock_guard<std::mutex> lock(mu_);
  static const char* kTypes[] = {"counter", "gauge", "histogram"};
  std::string o;
  for (const std::string& name : order_) {
    const Family& f = families_.at(name);
    o += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + kTypes[int(f.kind)] + "\n";
    if (f.kind != Kind::Histogram) {
      if (f.values.empty() && f.reads.empty()) o += name + " 0\n";
      for (const auto& [labels, v] : f.values) o += name + braces(label_text(labels)) + " " + number(v) + "\n";
      for (const auto& [labels, read] : f.reads) o += name + braces(label_text(labels)) + " " + number(read()) + "\n";
    } else {
      for (const auto& [labels, h] : f.histograms) {
        uint64_t cumulative = 0;
        for (size_t i = 0; i <= f.bounds.size(); ++i) {
          cumulative += h.counts[i];
          char bound[32];
          std::snprintf(bound, sizeof bound, "%g", i < f.bounds.size() ? f.bounds[i] : 0.0);
          const std::string le = "le=\"" + (i < f.bounds.size() ? std::string(bound) : "+Inf") + "\"";
          o += name + "_bucket{" + label_text(labels, le) + "} " + std::to_string(cumulative) + "\n";
        }
        o += name + "_sum" + braces(label_text(labels)) + " " + number(h.sum) + "\n";
        o += name + "_count" + braces(label_text(labels)) + " " + std::to_string(h.count) + "\n";
      }
    }
  }
  return o;
}

}  // namespace vit::app
