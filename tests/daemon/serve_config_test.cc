// The serve.yaml options file: every key, every problem at once with file:line.
#include "tessera/daemon/serve_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::daemon {
namespace {

using ::testing::HasSubstr;

TEST(ServeConfig, EveryKeyIsRead) {
  auto o = ParseServeConfig(R"(db: postgresql://tessera@db/tessera
listen: "[::1]:9090"
node_timeout_s: 45
http_threads: 4
cycle_interval_ms: 250
rate_per_s: 20.5
rate_burst: 50
tls_cert: /etc/tessera/tls/cert.pem
tls_key: /etc/tessera/tls/key.pem
metrics_auth: true
ui_dir: /usr/share/tessera/ui
scheduler:
  placement_policy: fgd
  fair_order: flat-drf
  min_runtime_s: 120
  preemption: false
  fair_share_preemption: false
  fair_share_half_life_s: 3600
)", "serve.yaml", {});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->db, "postgresql://tessera@db/tessera");
  EXPECT_EQ(o->listen_host, "::1");
  EXPECT_EQ(o->listen_port, 9090);
  EXPECT_EQ(o->node_timeout_s, 45);
  EXPECT_EQ(o->http_threads, 4);
  EXPECT_EQ(o->cycle_interval_ms, 250);
  EXPECT_EQ(o->ui_dir, "/usr/share/tessera/ui");
  EXPECT_DOUBLE_EQ(o->rate_per_s, 20.5);
  EXPECT_DOUBLE_EQ(o->rate_burst, 50);
  EXPECT_EQ(o->tls_cert_file, "/etc/tessera/tls/cert.pem");
  EXPECT_EQ(o->tls_key_file, "/etc/tessera/tls/key.pem");
  EXPECT_TRUE(o->metrics_auth);
  EXPECT_EQ(o->scheduler.placement_policy, "fgd");
  EXPECT_EQ(o->scheduler.fair_order, "flat-drf");
  EXPECT_EQ(o->scheduler.min_runtime.count(), 120);
  EXPECT_FALSE(o->scheduler.preemption);
  EXPECT_FALSE(o->scheduler.fair_share_preemption);
  EXPECT_DOUBLE_EQ(o->scheduler.fair_share_half_life_s, 3600);
}

TEST(ServeConfig, AnEmptyFileKeepsTheDefaults) {
  ControlPlaneOptions base;
  base.db = "sqlite:x.db";
  auto o = ParseServeConfig("", "serve.yaml", base);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->db, "sqlite:x.db");
}

TEST(ServeConfig, EveryProblemIsListedWithItsLine) {
  auto o = ParseServeConfig(R"(db: sqlite:x.db
listen: nowhere
node_timeout_s: 0
rate_per_s: fast
colour: red
scheduler:
  placement_policy: magic
  preemption: maybe
)", "serve.yaml", {});
  ASSERT_FALSE(o.ok());
  const std::string m(o.status().message());
  EXPECT_THAT(m, HasSubstr("serve.yaml:2: listen: expected HOST:PORT"));
  EXPECT_THAT(m, HasSubstr("serve.yaml:3: node_timeout_s"));
  EXPECT_THAT(m, HasSubstr("serve.yaml:4: rate_per_s"));
  EXPECT_THAT(m, HasSubstr("serve.yaml:5: colour: unknown key"));
  EXPECT_THAT(m, HasSubstr("serve.yaml:7: scheduler.placement_policy: unknown policy 'magic'"));
  EXPECT_THAT(m, HasSubstr("serve.yaml:8: scheduler.preemption: expected true or false"));
  EXPECT_FALSE(ParseServeConfig("db: [unclosed", "serve.yaml", {}).ok());
  EXPECT_FALSE(ParseServeConfig("- a list", "serve.yaml", {}).ok());
  EXPECT_FALSE(ParseServeConfig("{[1]: x}", "serve.yaml", {}).ok());
}

// The plan itself is read and parsed when the control plane starts (invoices_api_test.cc).
TEST(ServeConfig, APricePlanPathIsReadAsGiven) {
  auto o = ParseServeConfig("price_plan: plans/2026.yaml\n", "serve.yaml", {});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->price_plan, "plans/2026.yaml");
  auto bad = ParseServeConfig("price_plan: [a, b]\n", "serve.yaml", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("serve.yaml:1: price_plan: expected a non-empty string"));
}

// Issue 31, item 10: a key is its flag's name (`--node-timeout` -> node_timeout or node-timeout);
// the older field-named keys are aliases; one option under two keys is a problem naming both.
TEST(ServeConfig, KeysAreTheFlagNamesAndTheOldKeysAliases) {
  auto o = ParseServeConfig("node_timeout: 45\nthreads: 4\nrate: 20.5\nburst: 50\ntls-cert: c.pem\ntls_key: k.pem\n"
                            "cycle-interval-ms: 250\nprice-plan: p.yaml\nmetrics-auth: true\n",
                            "serve.yaml", {});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->node_timeout_s, 45);
  EXPECT_EQ(o->http_threads, 4);
  EXPECT_DOUBLE_EQ(o->rate_per_s, 20.5);
  EXPECT_DOUBLE_EQ(o->rate_burst, 50);
  EXPECT_EQ(o->tls_cert_file, "c.pem");
  EXPECT_EQ(o->cycle_interval_ms, 250);
  EXPECT_EQ(o->price_plan, "p.yaml");
  EXPECT_TRUE(o->metrics_auth);
  auto twice = ParseServeConfig("burst: 5\nrate_burst: 6\nnode-timeout: 3\nnode_timeout_s: 4\n", "serve.yaml", {});
  ASSERT_FALSE(twice.ok());
  const std::string m(twice.status().message());
  EXPECT_THAT(m, HasSubstr("serve.yaml:2: rate_burst: set again (line 1 has burst, the same option)"));
  EXPECT_THAT(m, HasSubstr("serve.yaml:4: node_timeout_s: set again (line 3 has node-timeout, the same option)"));
}

}  // namespace
}  // namespace tessera::daemon
