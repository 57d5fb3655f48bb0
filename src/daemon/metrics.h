// Prometheus metrics of `tessera serve`: counters, gauges and histograms with labels, rendered
// in the Prometheus text exposition format (version 0.0.4) for GET /metrics. `promtool check
// metrics` accepts what Render() prints (tested).
//
//   MetricsRegistry m;
//   Counter* requests = *m.AddCounter("tessera_api_requests_total", "API requests.", {"route", "code"});
//   requests->Inc({"GET /v1/workloads/{id}", "200"});
//   Histogram* latency = *m.AddHistogram("tessera_api_request_seconds", "API latency.", {"route"},
//                                        {0.001, 0.01, 0.1});
//   latency->Observe({"GET /v1/workloads/{id}"}, 0.0042);
//   m.Render() ->
//     # HELP tessera_api_requests_total API requests.
//     # TYPE tessera_api_requests_total counter
//     tessera_api_requests_total{route="GET /v1/workloads/{id}",code="200"} 1
//     # HELP tessera_api_request_seconds API latency.
//     # TYPE tessera_api_request_seconds histogram
//     tessera_api_request_seconds_bucket{route="GET /v1/workloads/{id}",le="0.001"} 0
//     tessera_api_request_seconds_bucket{route="GET /v1/workloads/{id}",le="0.01"} 1
//     ... le="+Inf"} 1, then _sum 0.0042 and _count 1
// Families render in the order they were added, series in label order.
//
// Thread-safety: Add* before the server starts; Inc/Set/Observe/Render from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::daemon {

using LabelValues = std::vector<std::string>;

class MetricFamily {
 public:
  virtual ~MetricFamily() = default;
  virtual void Render(std::string& out) const = 0;
};

class Counter : public MetricFamily {
 public:
  // `by` >= 0 (a negative increment is ignored: counters only go up).
  void Inc(const LabelValues& labels, double by = 1);
  double Value(const LabelValues& labels) const;
  void Render(std::string& out) const override;

 private:
  friend class MetricsRegistry;
  std::string name_, help_;
  std::vector<std::string> label_names_;
  mutable std::mutex mu_;
  std::map<LabelValues, double> values_;
};

class Gauge : public MetricFamily {
 public:
  void Set(const LabelValues& labels, double value);
  void Add(const LabelValues& labels, double by);
  // Forgets a series (a tenant that is gone).
  void Remove(const LabelValues& labels);
  double Value(const LabelValues& labels) const;
  void Render(std::string& out) const override;

 private:
  friend class MetricsRegistry;
  std::string name_, help_;
  std::vector<std::string> label_names_;
  mutable std::mutex mu_;
  std::map<LabelValues, double> values_;
};

class Histogram : public MetricFamily {
 public:
  void Observe(const LabelValues& labels, double value);
  void Render(std::string& out) const override;

 private:
  friend class MetricsRegistry;
  struct Series {
    std::vector<uint64_t> buckets;  // per upper bound, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  std::string name_, help_;
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;  // ascending, without +Inf
  mutable std::mutex mu_;
  std::map<LabelValues, Series> series_;
};

class MetricsRegistry {
 public:
  // INVALID_ARGUMENT: a name not matching [a-zA-Z_:][a-zA-Z0-9_:]*, a label name not matching
  // [a-zA-Z_][a-zA-Z0-9_]* (or "le" on a histogram), a name already added, bounds not strictly
  // ascending. The returned pointers live as long as the registry.
  StatusOr<Counter*> AddCounter(std::string name, std::string help, std::vector<std::string> labels);
  StatusOr<Gauge*> AddGauge(std::string name, std::string help, std::vector<std::string> labels);
  StatusOr<Histogram*> AddHistogram(std::string name, std::string help,
                                    std::vector<std::string> labels, std::vector<double> bounds);
  std::string Render() const;

 private:
  Status CheckNew(const std::string& name, const std::vector<std::string>& labels) const;
  std::vector<std::unique_ptr<MetricFamily>> families_;
  std::vector<std::string> names_;
};

// Label values are escaped as the format says: \ -> \\, " -> \", newline -> \n.
std::string EscapeLabelValue(std::string_view v);
// A sample value: integers without a fraction, others with full precision, +Inf/-Inf/NaN.
std::string FormatSampleValue(double v);

}  // namespace tessera::daemon
