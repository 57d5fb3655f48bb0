// fleet_load: a fleet of simulated node agents against a running `tessera serve`, from one
// process (issue 32, "Cheap at scale": 1,000 agents, heartbeat 1 s, usage 10 s; the daemon at
// <= 20 % of one core, heartbeat p99 <= 50 ms).
//
//   fleet_load --port P --token ADMIN --agents 1000 --gpus 8 --seconds 60 [--serve-pid PID]
//              [--connections 32] [--heartbeat-ms 1000] [--usage-s 10] [--desired changed|always]
//
// Setup (not measured): one node-agent token per node, bound to that node (POST /v1/tokens
// {"role": "node-agent", "node": "fleet-0042"}), and each node registered with GPUS fake
// H100-80GB. Then every agent does what `tessera agent` does each round, spread evenly over the
// period: POST /v1/nodes/{name}/heartbeat, GET /v1/nodes/{name}/desired when the heartbeat's
// answer named a desired_version other than the one the agent holds (or none), or 30 s after its
// last GET (node::kDesiredRefetchMs; `--desired always`: every round, as agents did before issue
// 32's version), and every --usage-s a POST /v1/nodes/{name}/usage of one sample per GPU. The agents share --connections keep-alive
// connections (one thread each, the agents of a connection taking turns on it), paced by the
// wall clock: an agent whose turn is late goes at once, so a slow server shows as latency, not
// as a lower offered rate.
//
// Prints the offered and achieved rates, heartbeat latency p50/p99/max (ms, client side), the
// non-2xx count, and with --serve-pid the daemon's CPU over the window (utime + stime from
// /proc/PID/stat, in % of one core). Worked example (2-core VM shared, 1,000 agents, 30 s):
//   requests 34000 (1133/s)  desired gets 1000  usage posts 3000 ...  heartbeat ms p50 0.13
//   p99 0.53 ...  serve cpu 19.5 % of one core  (median of 3; `--desired always`, or a serve
//   that names no version: 63000 requests, 2100/s; README, "`tessera serve` under 1,000 node agents")
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tessera/api/node_wire.h"
#include "tessera/node/agent.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
constexpr auto kRefetch = std::chrono::milliseconds(tessera::node::kDesiredRefetchMs);

struct Options {
  int port = 0;
  std::string token;
  int agents = 1000;
  int gpus = 8;
  int seconds = 60;
  long serve_pid = 0;
  int connections = 32;
  int heartbeat_ms = 1000;
  int usage_s = 10;
  bool desired_always = false;
};

[[noreturn]] void Usage(const std::string& why) {
  std::cerr << "fleet_load: " << why
            << "\nusage: fleet_load --port P --token ADMIN [--agents 1000] [--gpus 8] [--seconds 60] "
               "[--serve-pid PID] [--connections 32] [--heartbeat-ms 1000] [--usage-s 10] "
               "[--desired changed|always]\n";
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage(a + " needs a value");
    const std::string v = argv[++i];
    auto num = [&](long lo, long hi) {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < lo || n > hi)
        Usage(a + ": '" + v + "' is not a number " + std::to_string(lo) + ".." + std::to_string(hi));
      return n;
    };
    if (a == "--port") o.port = static_cast<int>(num(1, 65535));
    else if (a == "--token") o.token = v;
    else if (a == "--agents") o.agents = static_cast<int>(num(1, 100000));
    else if (a == "--gpus") o.gpus = static_cast<int>(num(1, 16));
    else if (a == "--seconds") o.seconds = static_cast<int>(num(1, 86400));
    else if (a == "--serve-pid") o.serve_pid = num(1, 1L << 30);
    else if (a == "--connections") o.connections = static_cast<int>(num(1, 1024));
    else if (a == "--heartbeat-ms") o.heartbeat_ms = static_cast<int>(num(10, 600000));
    else if (a == "--usage-s") o.usage_s = static_cast<int>(num(1, 86400));
    else if (a == "--desired" && (v == "changed" || v == "always")) o.desired_always = v == "always";
    else if (a == "--desired") Usage("--desired: '" + v + "' is not changed or always");
    else Usage("unknown option " + a);
  }
  if (o.port == 0 || o.token.empty()) Usage("--port and --token are required");
  return o;
}

// CPU seconds (user + system) of a process so far, from /proc/PID/stat fields 14 and 15.
double CpuSeconds(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(text.substr(paren + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i == 14 || i == 15) ticks += std::strtod(field.c_str(), nullptr);
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string NodeName(int i) {
  char name[32];
  std::snprintf(name, sizeof name, "fleet-%04d", i);
  return name;
}

httplib::Headers Auth(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }

// One usage sample per GPU for [start, end): half a GPU allocated, a quarter used.
std::string UsageBody(const std::string& node, int gpus, int64_t seq, int64_t start, int64_t end) {
  json samples = json::array();
  for (int g = 0; g < gpus; ++g) {
    const int64_t span = end - start;
    samples.push_back({{"tenant", "fleet"}, {"workload", node + "-" + std::to_string(g)}, {"gpu", std::to_string(g)},
                       {"model", "H100-80GB"}, {"partition", "share"}, {"seq", seq}, {"start", start}, {"end", end},
                       {"gpu_milli_s_allocated", 500 * span}, {"gpu_milli_s_used", 250 * span},
                       {"memory_mib_s", 8192 * span}, {"peak_memory_mib", 8192}, {"kernel_launches", 1000},
                       {"bytes_transferred", -1}});
  }
  return json{{"samples", samples}}.dump();
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  httplib::Client admin("127.0.0.1", o.port);
  admin.set_read_timeout(30, 0);
  admin.set_keep_alive(true);
  admin.set_tcp_nodelay(true);

  // --- setup: a token per node, bound to it; each node registered ------------------------------
  std::vector<std::string> tokens(static_cast<size_t>(o.agents));
  std::cerr << "fleet_load: " << o.agents << " node tokens and registrations ..." << std::flush;
  for (int i = 0; i < o.agents; ++i) {
    const std::string node = NodeName(i);
    // The admin token has the per-token rate limit (200/s, burst 400): a quick daemon is waited
    // for (Retry-After), not failed.
    auto r = admin.Post("/v1/tokens", Auth(o.token), json{{"role", "node-agent"}, {"node", node}}.dump(),
                        "application/json");
    while (r && r->status == 429) {
      std::this_thread::sleep_for(std::chrono::seconds(std::max(1, std::atoi(r->get_header_value("Retry-After").c_str()))));
      r = admin.Post("/v1/tokens", Auth(o.token), json{{"role", "node-agent"}, {"node", node}}.dump(), "application/json");
    }
    if (!r || r->status != 201) {
      std::cerr << "\nfleet_load: POST /v1/tokens for " << node << ": "
                << (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error())) << "\n";
      return 1;
    }
    tokens[static_cast<size_t>(i)] = json::parse(r->body).at("token").get<std::string>();
    json gpus = json::array();
    for (int g = 0; g < o.gpus; ++g)
      gpus.push_back({{"index", g}, {"uuid", "GPU-" + node + "-" + std::to_string(g)}, {"model", "H100-80GB"}});
    auto reg = admin.Post("/v1/nodes/" + node + "/register", Auth(tokens[static_cast<size_t>(i)]),
                          json{{"cpu_milli", 256000}, {"memory_mib", 2097152}, {"gpus", gpus}}.dump(), "application/json");
    if (!reg || reg->status != 200) {
      std::cerr << "\nfleet_load: register " << node << ": "
                << (reg ? std::to_string(reg->status) + " " + reg->body : httplib::to_string(reg.error())) << "\n";
      return 1;
    }
  }
  std::cerr << " done\n";

  // --- the measured window ---------------------------------------------------------------------
  std::mutex mu;
  std::vector<double> heartbeat_ms;
  std::atomic<long> rounds{0}, requests{0}, non2xx{0}, failures{0}, usage_posts{0}, desired_gets{0};
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(o.seconds);
  const auto period = std::chrono::milliseconds(o.heartbeat_ms);
  const double cpu_before = o.serve_pid ? CpuSeconds(o.serve_pid) : 0;
  const int64_t wall_start_s = static_cast<int64_t>(std::time(nullptr));
  const long rounds_per_usage = std::max(1L, 1000L * o.usage_s / o.heartbeat_ms);

  std::vector<std::thread> threads;
  for (int c = 0; c < o.connections; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client link("127.0.0.1", o.port);
      link.set_keep_alive(true);
      link.set_tcp_nodelay(true);  // as the agent's own link (api_client.cc): no Nagle wait between header and body
      link.set_read_timeout(30, 0);
      std::vector<int> mine;
      for (int i = c; i < o.agents; i += o.connections) mine.push_back(i);
      std::vector<double> local;
      std::vector<int64_t> usage_from(mine.size(), wall_start_s), seq(mine.size(), 1);
      std::vector<long> round_of(mine.size(), 0);
      // Each agent's desired state as tessera agent keeps it: the version it holds, when fetched.
      std::vector<std::string> held_version(mine.size());
      std::vector<Clock::time_point> fetched_at(mine.size());
      // Agent i's k-th round is due at start + k * period + offset(i): offsets spread the fleet.
      while (true) {
        size_t next = 0;
        auto due = Clock::time_point::max();
        for (size_t k = 0; k < mine.size(); ++k) {
          const auto offset = period * mine[k] / o.agents;
          const auto t = start + period * round_of[k] + offset;
          if (t < due) {
            due = t;
            next = k;
          }
        }
        if (due >= end) break;
        std::this_thread::sleep_until(due);
        const size_t k = next;
        const std::string node = NodeName(mine[k]);
        const httplib::Headers h = Auth(tokens[static_cast<size_t>(mine[k])]);
        const auto t0 = Clock::now();
        auto hb = link.Post("/v1/nodes/" + node + "/heartbeat", h, "{}", "application/json");
        const auto t1 = Clock::now();
        local.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        ++requests;
        if (!hb) ++failures;
        else if (hb->status / 100 != 2) ++non2xx;
        std::string heard;
        if (hb && hb->status == 200) {
          const json answer = json::parse(hb->body, nullptr, false);
          if (answer.is_object()) heard = answer.value("desired_version", std::string());
        }
        if (o.desired_always || heard.empty() || heard != held_version[k] || t1 - fetched_at[k] >= kRefetch) {
          auto desired = link.Get("/v1/nodes/" + node + "/desired", h);
          ++requests;
          ++desired_gets;
          if (!desired) ++failures;
          else if (desired->status / 100 != 2) ++non2xx;
          else {
            held_version[k] = tessera::api::DesiredVersion(desired->body);
            fetched_at[k] = t1;
          }
        }
        const int64_t now_s = static_cast<int64_t>(std::time(nullptr));
        // Every rounds_per_usage-th round (rounds 9, 19, 29 at 1 s and 10 s): the same count in
        // every run of a window (by the wall clock's seconds a 30-s window held 2 or 3 posts per
        // agent, which moved the daemon's CPU by a few points between runs).
        if ((round_of[k] + 1) % rounds_per_usage == 0 && now_s > usage_from[k]) {
          auto u = link.Post("/v1/nodes/" + node + "/usage", h, UsageBody(node, o.gpus, seq[k]++, usage_from[k], now_s),
                             "application/json");
          ++requests;
          ++usage_posts;
          if (!u) ++failures;
          else if (u->status / 100 != 2) ++non2xx;
          usage_from[k] = now_s;
        }
        ++round_of[k];
        ++rounds;
      }
      std::lock_guard<std::mutex> lock(mu);
      heartbeat_ms.insert(heartbeat_ms.end(), local.begin(), local.end());
    });
  }
  for (std::thread& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = o.serve_pid ? CpuSeconds(o.serve_pid) - cpu_before : 0;

  const double offered = static_cast<double>(o.agents) * 1000.0 / o.heartbeat_ms;
  std::printf("agents %d  gpus/node %d  window %.1f s  rounds %ld (%.0f/s, offered %.0f/s)\n", o.agents, o.gpus,
              elapsed, rounds.load(), static_cast<double>(rounds.load()) / elapsed, offered);
  std::printf("requests %ld (%.0f/s)  desired gets %ld  usage posts %ld  non-2xx %ld  failed %ld\n", requests.load(),
              static_cast<double>(requests.load()) / elapsed, desired_gets.load(), usage_posts.load(), non2xx.load(),
              failures.load());
  std::vector<double> hb = heartbeat_ms;
  const double p50 = Percentile(hb, 0.50), p99 = Percentile(hb, 0.99);
  const double max = hb.empty() ? 0 : *std::max_element(hb.begin(), hb.end());
  std::printf("heartbeat ms  p50 %.2f  p99 %.2f  max %.2f\n", p50, p99, max);
  if (o.serve_pid) std::printf("serve cpu %.1f %% of one core\n", 100.0 * cpu / elapsed);
  return non2xx.load() + failures.load() == 0 ? 0 : 1;
}
