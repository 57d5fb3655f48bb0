#include "tessera/daemon/serve_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "tessera/placement/policy.h"
#include "tessera/sched/fair_order.h"

namespace tessera::daemon {

Status SplitListenAddress(std::string_view listen, std::string* host, uint16_t* port) {
  const std::string l(listen);
  const size_t colon = l.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == l.size())
    return InvalidArgumentError("listen: expected HOST:PORT (e.g. 127.0.0.1:8080), got '" + l + "'");
  *host = l.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  char* end = nullptr;
  errno = 0;
  const long p = std::strtol(l.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || errno != 0 || p < 0 || p > 65535) return InvalidArgumentError("listen: port must be 0..65535");
  *port = static_cast<uint16_t>(p);
  return Status::Ok();
}

namespace {

struct Walk {
  std::string source;
  std::vector<std::string> problems;
  void Problem(const YAML::Node& n, const std::string& what) {
    problems.push_back(source + ":" + std::to_string(n.Mark().line + 1) + ": " + what);
  }
  bool Number(const YAML::Node& n, const std::string& key, double lo, double hi, double* out) {
    char* end = nullptr;
    const std::string s = n.IsScalar() ? n.Scalar() : "";
    const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(v >= lo && v <= hi)) {
      std::ostringstream range;
      range << lo << ".." << hi;
      Problem(n, key + ": expected a number in " + range.str() + (s.empty() ? "" : ", got '" + s + "'"));
      return false;
    }
    *out = v;
    return true;
  }
  bool Int(const YAML::Node& n, const std::string& key, int lo, int hi, int* out) {
    double v = 0;
    if (!Number(n, key, lo, hi, &v)) return false;
    if (v != std::floor(v)) {
      Problem(n, key + ": expected an integer");
      return false;
    }
    *out = static_cast<int>(v);
    return true;
  }
  bool Bool(const YAML::Node& n, const std::string& key, bool* out) {
    const std::string s = n.IsScalar() ? n.Scalar() : "";
    if (s == "true" || s == "false") {
      *out = s == "true";
      return true;
    }
    Problem(n, key + ": expected true or false");
    return false;
  }
  bool Str(const YAML::Node& n, const std::string& key, std::string* out) {
    if (!n.IsScalar() || n.Scalar().empty()) {
      Problem(n, key + ": expected a non-empty string");
      return false;
    }
    *out = n.Scalar();
    return true;
  }
};

void Scheduler(Walk& w, const YAML::Node& s, sched::SchedulerOptions& o) {
  if (!s.IsMap()) return w.Problem(s, "scheduler: expected a mapping");
  for (const auto& kv : s) {
    const std::string key = "scheduler." + kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    const std::string k = kv.first.as<std::string>();
    if (k == "placement_policy") {
      std::string p;
      if (!w.Str(v, key, &p)) continue;
      bool known = false;
      for (const std::string& name : placement::PolicyNames()) known |= name == p;
      if (!known) w.Problem(v, key + ": unknown policy '" + p + "'");
      else o.placement_policy = p;
    } else if (k == "fair_order") {
      std::string p;
      if (!w.Str(v, key, &p)) continue;
      bool known = false;
      for (const std::string& name : sched::FairOrderNames()) known |= name == p;
      if (!known) w.Problem(v, key + ": unknown fair order '" + p + "'");
      else o.fair_order = p;
    } else if (k == "min_runtime_s") {
      int x = 0;
      if (w.Int(v, key, 0, 7 * 86400, &x)) o.min_runtime = sched::Seconds{x};
    } else if (k == "preemption") {
      (void)w.Bool(v, key, &o.preemption);
    } else if (k == "fair_share_preemption") {
      (void)w.Bool(v, key, &o.fair_share_preemption);
    } else if (k == "fair_share_half_life_s") {
      (void)w.Number(v, key, 0, 1e9, &o.fair_share_half_life_s);
    } else {
      w.Problem(kv.first, key + ": unknown key (known: placement_policy, fair_order, min_runtime_s, preemption, "
                                "fair_share_preemption, fair_share_half_life_s)");
    }
  }
}

}  // namespace

StatusOr<ControlPlaneOptions> ParseServeConfig(std::string_view text, std::string_view source,
                                               ControlPlaneOptions base) {
  Walk w{std::string(source), {}};
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(w.source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (root.IsNull()) return base;
  if (!root.IsMap()) return InvalidArgumentError(w.source + ": expected a mapping of options");
  // A key is its flag's name (`--node-timeout` -> node_timeout or node-timeout); the keys of
  // before, named after the options' fields, stay as aliases. Each option may be set once.
  const std::map<std::string, std::string> aliases = {
      {"node_timeout_s", "node_timeout"}, {"http_threads", "threads"}, {"rate_per_s", "rate"}, {"rate_burst", "burst"}};
  std::map<std::string, std::pair<std::string, int>> seen;  // option -> (key as written, line)
  try {
  for (const auto& kv : root) {
    const std::string written = kv.first.as<std::string>();
    std::string k = written;
    std::replace(k.begin(), k.end(), '-', '_');
    if (auto a = aliases.find(k); a != aliases.end()) k = a->second;
    const YAML::Node& v = kv.second;
    const int line = kv.first.Mark().line + 1;
    if (auto [at, fresh] = seen.emplace(k, std::pair{written, line}); !fresh) {
      w.Problem(kv.first, written + ": set again (line " + std::to_string(at->second.second) + " has " +
                              at->second.first + ", the same option)");
      continue;
    }
    if (k == "db") (void)w.Str(v, written, &base.db);
    else if (k == "listen") {
      std::string l;
      if (w.Str(v, k, &l))
        if (Status st = SplitListenAddress(l, &base.listen_host, &base.listen_port); !st.ok())
          w.Problem(v, std::string(st.message()));
    } else if (k == "node_timeout") (void)w.Int(v, written, 1, 86400, &base.node_timeout_s);
    else if (k == "threads") (void)w.Int(v, written, 1, 64, &base.http_threads);
    else if (k == "cycle_interval_ms") (void)w.Int(v, written, 10, 600000, &base.cycle_interval_ms);
    else if (k == "rate") (void)w.Number(v, written, 1e-3, 1e9, &base.rate_per_s);
    else if (k == "burst") (void)w.Number(v, written, 1, 1e9, &base.rate_burst);
    else if (k == "tls_cert") (void)w.Str(v, written, &base.tls_cert_file);
    else if (k == "tls_key") (void)w.Str(v, written, &base.tls_key_file);
    else if (k == "scheduler") Scheduler(w, v, base.scheduler);
    else if (k == "price_plan") (void)w.Str(v, written, &base.price_plan);
    else if (k == "metrics_auth") (void)w.Bool(v, written, &base.metrics_auth);
    else if (k == "ui_dir") (void)w.Str(v, written, &base.ui_dir);
    else
      w.Problem(kv.first, written + ": unknown key (known: the flags of tessera serve without --: db, listen, "
                                    "node_timeout, threads, cycle_interval_ms, rate, burst, tls_cert, tls_key, "
                                    "price_plan, metrics_auth, ui_dir; and scheduler)");
  }
  } catch (const YAML::Exception& e) {  // a key that is not a string
    w.problems.push_back(w.source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!w.problems.empty()) {
    std::string all;
    for (const std::string& p : w.problems) all += (all.empty() ? "" : "\n") + p;
    return InvalidArgumentError(all);
  }
  return base;
}

StatusOr<ControlPlaneOptions> LoadServeConfig(const std::string& path, ControlPlaneOptions base) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read the config file " + path);
  std::stringstream s;
  s << in.rdbuf();
  return ParseServeConfig(s.str(), path, std::move(base));
}

}  // namespace tessera::daemon
