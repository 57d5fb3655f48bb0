// What both HTTP candidate servers serve (docs/decisions/0003-http-library.md): the control
// plane's hottest reads, from memory, behind a bearer token, so that the measurement is the
// library's cost and not the store's.
//   GET /v1/workloads/{id}                      one workload's JSON (about 400 bytes)
//   GET /v1/workloads?tenant=T&limit=100        a page of that tenant's workloads
// 1,000 workloads for each of 10 tenants.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera::bench_http {

inline constexpr std::string_view kToken = "Bearer tsr_benchmark_token_0123456789abcdef";

struct Catalogue {
  std::unordered_map<int64_t, std::string> by_id;
  std::unordered_map<std::string, std::vector<int64_t>> by_tenant;

  Catalogue() {
    for (int t = 0; t < 10; ++t) {
      const std::string tenant = "team-" + std::to_string(t);
      for (int k = 0; k < 1000; ++k) {
        const int64_t id = t * 1000 + k + 1;
        by_id[id] = "{\"id\":" + std::to_string(id) + ",\"tenant\":\"" + tenant +
                    "\",\"state\":\"running\",\"qos\":\"Burstable\",\"gpus\":1,\"gpu_milli\":500,"
                    "\"gpu_mem_mib\":20480,\"priority\":0,\"mode\":\"mps\",\"placement\":{\"node\":"
                    "\"gpu-node-017\",\"gpus\":[3]},\"submitted\":\"2026-12-01T10:00:00Z\","
                    "\"started\":\"2026-12-01T10:00:02Z\",\"wait_reason\":null}";
        by_tenant[tenant].push_back(id);
      }
    }
  }

  // The body for `target` ("/v1/workloads/17" or "/v1/workloads?tenant=team-3&limit=100"), or
  // an empty string (404).
  std::string Answer(std::string_view target) const {
    constexpr std::string_view kPrefix = "/v1/workloads";
    if (target.substr(0, kPrefix.size()) != kPrefix) return "";
    std::string_view rest = target.substr(kPrefix.size());
    if (!rest.empty() && rest[0] == '/') {
      int64_t id = 0;
      for (char c : rest.substr(1)) {
        if (c < '0' || c > '9') return "";
        id = id * 10 + (c - '0');
      }
      auto it = by_id.find(id);
      return it == by_id.end() ? "" : it->second;
    }
    const size_t at = rest.find("tenant=");
    if (at == std::string_view::npos) return "";
    std::string_view tenant = rest.substr(at + 7);
    tenant = tenant.substr(0, tenant.find('&'));
    auto it = by_tenant.find(std::string(tenant));
    if (it == by_tenant.end()) return "";
    std::string body = "{\"workloads\":[";
    for (size_t k = 0; k < 100 && k < it->second.size(); ++k) {
      if (k) body += ',';
      body += by_id.at(it->second[k]);
    }
    body += "],\"continue\":\"100\"}";
    return body;
  }
};

}  // namespace tessera::bench_http
