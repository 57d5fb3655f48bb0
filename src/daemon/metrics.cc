#include "src/daemon/metrics.h"

#include <cmath>
#include <cstdio>

namespace tessera::daemon {

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {

std::string EscapeHelp(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void Header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + " " + EscapeHelp(help) + "\n# TYPE " + name + " " + type + "\n";
}

// {a="x",b="y"} (with `extra` appended, e.g. le="0.1"); "" without labels.
std::string LabelSet(const std::vector<std::string>& names, const LabelValues& values,
                     const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (out.empty() ? "" : ",") + names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  if (!extra.empty()) out += (out.empty() ? "" : ",") + extra;
  return out.empty() ? "" : "{" + out + "}";
}

bool ValidName(std::string_view n, bool colons) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (colons && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string FormatSampleValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", v);
  }
  return buf;
}

void Counter::Inc(const LabelValues& labels, double by) {
  if (labels.size() != label_names_.size() || !(by >= 0)) return;
  std::lock_guard<std::mutex> lock(mu_);
  values_[labels] += by;
}

double Counter::Value(const LabelValues& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void Counter::Render(std::string& out) const {
  Header(out, name_, help_, "counter");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [labels, v] : values_)
    out += name_ + LabelSet(label_names_, labels) + " " + FormatSampleValue(v) + "\n";
}

void Gauge::Set(const LabelValues& labels, double value) {
  if (labels.size() != label_names_.size()) return;
  std::lock_guard<std::mutex> lock(mu_);
  values_[labels] = value;
}

void Gauge::Add(const LabelValues& labels, double by) {
  if (labels.size() != label_names_.size()) return;
  std::lock_guard<std::mutex> lock(mu_);
  values_[labels] += by;
}

void Gauge::Remove(const LabelValues& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  values_.erase(labels);
}

double Gauge::Value(const LabelValues& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void Gauge::Render(std::string& out) const {
  Header(out, name_, help_, "gauge");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [labels, v] : values_)
    out += name_ + LabelSet(label_names_, labels) + " " + FormatSampleValue(v) + "\n";
}

void Histogram::Observe(const LabelValues& labels, double value) {
  if (labels.size() != label_names_.size() || std::isnan(value)) return;
  std::lock_guard<std::mutex> lock(mu_);
  Series& s = series_[labels];
  if (s.buckets.empty()) s.buckets.assign(bounds_.size(), 0);
  for (size_t b = 0; b < bounds_.size(); ++b)
    if (value <= bounds_[b]) {
      s.buckets[b]++;
      break;
    }
  s.count++;
  s.sum += value;
}

void Histogram::Render(std::string& out) const {
  Header(out, name_, help_, "histogram");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [labels, s] : series_) {
    uint64_t cumulative = 0;
    for (size_t b = 0; b < bounds_.size(); ++b) {
      cumulative += s.buckets[b];
      out += name_ + "_bucket" +
             LabelSet(label_names_, labels, "le=\"" + FormatSampleValue(bounds_[b]) + "\"") + " " +
             std::to_string(cumulative) + "\n";
    }
    out += name_ + "_bucket" + LabelSet(label_names_, labels, "le=\"+Inf\"") + " " +
           std::to_string(s.count) + "\n";
    out += name_ + "_sum" + LabelSet(label_names_, labels) + " " + FormatSampleValue(s.sum) + "\n";
    out += name_ + "_count" + LabelSet(label_names_, labels) + " " + std::to_string(s.count) + "\n";
  }
}

Status MetricsRegistry::CheckNew(const std::string& name, const std::vector<std::string>& labels) const {
  if (!ValidName(name, true)) return InvalidArgumentError("metric name '" + name + "' is not valid");
  for (const std::string& n : names_)
    if (n == name) return InvalidArgumentError("metric '" + name + "' is added twice");
  for (const std::string& l : labels)
    if (!ValidName(l, false) || l.rfind("__", 0) == 0)
      return InvalidArgumentError("metric '" + name + "': label name '" + l + "' is not valid");
  return Status::Ok();
}

StatusOr<Counter*> MetricsRegistry::AddCounter(std::string name, std::string help,
                                               std::vector<std::string> labels) {
  TESSERA_RETURN_IF_ERROR(CheckNew(name, labels));
  auto c = std::make_unique<Counter>();
  c->name_ = name;
  c->help_ = std::move(help);
  c->label_names_ = std::move(labels);
  Counter* raw = c.get();
  names_.push_back(std::move(name));
  families_.push_back(std::move(c));
  return raw;
}

StatusOr<Gauge*> MetricsRegistry::AddGauge(std::string name, std::string help,
                                           std::vector<std::string> labels) {
  TESSERA_RETURN_IF_ERROR(CheckNew(name, labels));
  auto g = std::make_unique<Gauge>();
  g->name_ = name;
  g->help_ = std::move(help);
  g->label_names_ = std::move(labels);
  Gauge* raw = g.get();
  names_.push_back(std::move(name));
  families_.push_back(std::move(g));
  return raw;
}

StatusOr<Histogram*> MetricsRegistry::AddHistogram(std::string name, std::string help,
                                                   std::vector<std::string> labels,
                                                   std::vector<double> bounds) {
  TESSERA_RETURN_IF_ERROR(CheckNew(name, labels));
  for (const std::string& l : labels)
    if (l == "le") return InvalidArgumentError("histogram '" + name + "': 'le' is reserved");
  if (bounds.empty()) return InvalidArgumentError("histogram '" + name + "': no bucket bounds");
  for (size_t i = 0; i < bounds.size(); ++i)
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1])))
      return InvalidArgumentError("histogram '" + name + "': bounds must be finite and strictly ascending");
  auto h = std::make_unique<Histogram>();
  h->name_ = name;
  h->help_ = std::move(help);
  h->label_names_ = std::move(labels);
  h->bounds_ = std::move(bounds);
  Histogram* raw = h.get();
  names_.push_back(std::move(name));
  families_.push_back(std::move(h));
  return raw;
}

std::string MetricsRegistry::Render() const {
  std::string out;
  for (const auto& f : families_) f->Render(out);
  return out;
}

}  // namespace tessera::daemon
