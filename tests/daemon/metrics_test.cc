// Prometheus exposition: the header's example exactly, escaping, histogram buckets, bad names,
// concurrent updates, and Debian's `promtool check metrics` accepting what Render prints.
#include "src/daemon/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <unistd.h>  // getpid: temporary files per process (worktrees run tests at once)

namespace tessera::daemon {
namespace {

using ::testing::HasSubstr;

TEST(Metrics, RendersTheHeaderExample) {
  MetricsRegistry m;
  Counter* requests = *m.AddCounter("tessera_api_requests_total", "API requests.", {"route", "code"});
  requests->Inc({"GET /v1/workloads/{id}", "200"});
  Histogram* latency =
      *m.AddHistogram("tessera_api_request_seconds", "API latency.", {"route"}, {0.001, 0.01, 0.1});
  latency->Observe({"GET /v1/workloads/{id}"}, 0.0042);
  EXPECT_EQ(m.Render(),
            "# HELP tessera_api_requests_total API requests.\n"
            "# TYPE tessera_api_requests_total counter\n"
            "tessera_api_requests_total{route=\"GET /v1/workloads/{id}\",code=\"200\"} 1\n"
            "# HELP tessera_api_request_seconds API latency.\n"
            "# TYPE tessera_api_request_seconds histogram\n"
            "tessera_api_request_seconds_bucket{route=\"GET /v1/workloads/{id}\",le=\"0.001\"} 0\n"
            "tessera_api_request_seconds_bucket{route=\"GET /v1/workloads/{id}\",le=\"0.01\"} 1\n"
            "tessera_api_request_seconds_bucket{route=\"GET /v1/workloads/{id}\",le=\"0.10000000000000001\"} 1\n"
            "tessera_api_request_seconds_bucket{route=\"GET /v1/workloads/{id}\",le=\"+Inf\"} 1\n"
            "tessera_api_request_seconds_sum{route=\"GET /v1/workloads/{id}\"} 0.0041999999999999997\n"
            "tessera_api_request_seconds_count{route=\"GET /v1/workloads/{id}\"} 1\n");
}

TEST(Metrics, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  MetricsRegistry m;
  Gauge* g = *m.AddGauge("tessera_tenant_gpu_milli", "GPU milli\nin use \\ now.", {"tenant"});
  g->Set({"te\"am"}, 1500);
  EXPECT_THAT(m.Render(), HasSubstr("# HELP tessera_tenant_gpu_milli GPU milli\\nin use \\\\ now.\n"));
  EXPECT_THAT(m.Render(), HasSubstr("tessera_tenant_gpu_milli{tenant=\"te\\\"am\"} 1500\n"));
  g->Remove({"te\"am"});
  EXPECT_THAT(m.Render(), ::testing::Not(HasSubstr("te\\\"am")));
}

TEST(Metrics, BadNamesBoundsAndLabelCountsAreRefusedOrIgnored) {
  MetricsRegistry m;
  EXPECT_FALSE(m.AddCounter("1bad", "h", {}).ok());
  EXPECT_FALSE(m.AddCounter("bad-name", "h", {}).ok());
  EXPECT_FALSE(m.AddCounter("ok_total", "h", {"bad-label"}).ok());
  EXPECT_FALSE(m.AddCounter("ok_total", "h", {"__reserved"}).ok());
  ASSERT_TRUE(m.AddCounter("ok_total", "h", {"a"}).ok());
  EXPECT_THAT(m.AddGauge("ok_total", "h", {}).status().message(), HasSubstr("added twice"));
  EXPECT_FALSE(m.AddHistogram("h_seconds", "h", {"le"}, {1}).ok());
  EXPECT_FALSE(m.AddHistogram("h_seconds", "h", {}, {}).ok());
  EXPECT_FALSE(m.AddHistogram("h_seconds", "h", {}, {1, 1}).ok());
  Counter* c = *m.AddCounter("c_total", "h", {"a"});
  c->Inc({"x", "y"});  // wrong label count: ignored
  c->Inc({"x"}, -5);   // counters never go down
  c->Inc({"x"}, 2);
  EXPECT_EQ(c->Value({"x"}), 2);
  EXPECT_EQ(FormatSampleValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatSampleValue(-3), "-3");
}

TEST(Metrics, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry m;
  Counter* c = *m.AddCounter("c_total", "h", {"t"});
  Histogram* h = *m.AddHistogram("h_seconds", "h", {}, {0.5});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int k = 0; k < 10000; ++k) {
        c->Inc({"x"});
        h->Observe({}, k % 2 ? 0.25 : 1.0);
        if (k % 1000 == 0) (void)m.Render();
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(c->Value({"x"}), 40000);
  EXPECT_THAT(m.Render(), HasSubstr("h_seconds_bucket{le=\"0.5\"} 20000\n"));
  EXPECT_THAT(m.Render(), HasSubstr("h_seconds_count 40000\n"));
}

// The real linter: Debian's promtool (scripts/setup installs the prometheus package).
TEST(Metrics, PromtoolAcceptsTheExposition) {
  ASSERT_EQ(std::system("command -v promtool > /dev/null"), 0)
      << "promtool is not installed (scripts/setup installs the prometheus package)";
  MetricsRegistry m;
  (*m.AddCounter("tessera_api_requests_total", "API requests by route and status.", {"route", "code"}))
      ->Inc({"GET /v1/workloads/{id}", "200"}, 3);
  (*m.AddGauge("tessera_queue_length", "Pending workloads per tenant.", {"tenant"}))->Set({"a \"b\"\n"}, 7);
  (*m.AddHistogram("tessera_api_request_seconds", "API latency.", {"route"}, {0.001, 0.01, 0.1, 1}))
      ->Observe({"POST /v1/workloads"}, 0.02);
  const std::string path = ::testing::TempDir() + "/tessera_metrics." + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << m.Render();
  const int rc = std::system(("promtool check metrics < " + path + " > " + path + ".out 2>&1").c_str());
  std::ifstream out(path + ".out");
  const std::string said((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << said;
  EXPECT_EQ(said, "") << said;  // no lint warnings either
  // And promtool does catch a broken exposition (the check can fail).
  std::ofstream(path) << "# TYPE x counter\nx{a=\"unterminated} 1\n";
  EXPECT_NE(std::system(("promtool check metrics < " + path + " > /dev/null 2>&1").c_str()), 0);
}

}  // namespace
}  // namespace tessera::daemon
