// `vit serve`'s metrics registry, written as Prometheus text (exposition format 0.0.4): families of
// counters and histograms told apart by their labels, updated under one lock, and gauges read from a
// function when /metrics is asked. A family is declared once, with its help and (histograms) buckets.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vit::app {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  enum class Kind { Counter, Gauge, Histogram };

  // Declares a family; its samples appear from its first update (a counter without labels at 0 at once).
  void counter(const std::string& name, const std::string& help);
  void histogram(const std::string& name, const std::string& help, std::vector<double> bounds);
  // A gauge or counter read from a function at scrape time; several label sets may share a name.
  void read(const std::string& name, Kind kind, const std::string& help, const Labels& labels,
            std::function<double()> read);

  // Shows a counter's or histogram's series at zero before its first update.
  void start(const std::string& name, const Labels& labels);
  void add(const std::string& name, const Labels& labels = {}, double v = 1);  // a counter
  void observe(const std::string& name, const Labels& labels, double v);      // a histogram

  std::string text() const;

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bound, not cumulative; one more for +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  struct Family {
    Kind kind = Kind::Counter;
    std::string help;
    std::vector<double> bounds;
    std::map<Labels, double> values;                   // counters
    std::map<Labels, Histogram> histograms;            // histograms
    std::vector<std::pair<Labels, std::function<double()>>> reads;
  };
  Family& family(const std::string& name, Kind kind);

  mutable std::mutex mu_;
  std::vector<std::string> order_;  // families in the order declared
  std::map<std::string, Family> families_;
};

}  // namespace vit::app
