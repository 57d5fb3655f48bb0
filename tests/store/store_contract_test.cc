// The store's contract: every test runs against SQLite and PostgreSQL (parameterized).
//
// SQLite: a fresh file in a temporary folder per test. PostgreSQL: a fresh schema per test on
// the server that tests/store/with_postgres.sh starts (it exports TESSERA_TEST_PG_URL, a URL of
// the form postgresql:///postgres?host=DIR&port=PORT&user=postgres, and TESSERA_TEST_REQUIRE_PG=1).
// Without the URL the PostgreSQL tests skip, unless TESSERA_TEST_REQUIRE_PG is set: then they fail.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "tessera/store/store.h"
#include "tests/testing/pg_schema.h"

namespace tessera::store {
namespace {

using ::testing::HasSubstr;

MATCHER_P2(StatusIs, code, message_matcher, "") {
  const Status& s = [](const auto& v) -> const Status& {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, Status>) {
      return v;
    } else {
      return v.status();
    }
  }(arg);
  if (s.code() != code) {
    *result_listener << "status is " << s.ToString();
    return false;
  }
  return ::testing::ExplainMatchResult(message_matcher, s.message(), result_listener);
}

class StoreContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-store-XXXXXX").string();
      ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
      dir_ = tmpl;
      url_ = "sqlite:" + dir_ + "/tessera.db";
    } else {
      if (!testing::PgTestSchema::Available()) {
        if (testing::PgTestSchema::Required()) {
          FAIL() << "TESSERA_TEST_REQUIRE_PG is set but TESSERA_TEST_PG_URL is not: the PostgreSQL "
                    "server of tests/store/with_postgres.sh did not come up";
        }
        GTEST_SKIP() << "PostgreSQL tests need a server: run them through tests/store/with_postgres.sh "
                        "(ctest runs store_postgres_contract)";
      }
      pg_ = std::make_unique<testing::PgTestSchema>();
      ASSERT_TRUE(pg_->Create());
      url_ = pg_->url();
      base_url_ = pg_->base_url();
    }
    Reopen();
  }

  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    pg_.reset();  // drops the schema
  }

  void Reopen(const Options& options = {}) {
    store_.reset();
    auto s = Open(url_, options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  Status Tx(const std::function<Status(Transaction&)>& fn) { return store_->Transact(fn); }

  // Runs fn in a transaction and returns its value (the test fails on an error).
  template <typename T>
  T Read(const std::function<StatusOr<T>(Transaction&)>& fn) {
    std::optional<T> out;
    Status s = Tx([&](Transaction& tx) -> Status {
      StatusOr<T> v = fn(tx);
      if (!v.ok()) return v.status();
      out = std::move(v).value();
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out ? std::move(*out) : T{};
  }

  Status Code(const std::function<Status(Transaction&)>& fn) { return Tx(fn); }

  void AddTenant(const std::string& name, const std::string& parent = "") {
    ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.CreateTenant({name, parent, "{}", 1, 1}); }).ok());
  }

  WorkloadRecord Workload(const std::string& tenant, int64_t seq) {
    WorkloadRecord w;
    w.tenant = tenant;
    w.spec_json = R"({"gpus":1})";
    w.state = WorkloadState::kPending;
    w.wait_reason = "queued";
    w.seq = seq;
    w.created_ms = w.updated_ms = 1000 + seq;
    return w;
  }

  void AppendAudits(int n) {
    ASSERT_TRUE(Tx([&](Transaction& tx) -> Status {
      for (int i = 1; i <= n; ++i) {
        TESSERA_RETURN_IF_ERROR(tx.AppendAudit({100 + i, "tok-" + std::to_string(i), "workload.create",
                                                "workloads/" + std::to_string(i), "201"})
                                    .status());
      }
      return Status::Ok();
    }).ok());
  }

  AuditVerification Verify() {
    auto v = store_->VerifyAuditChain();
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : AuditVerification{};
  }

  // Runs fns[i] on thread i so that all of them land in one group-commit batch, in order: thread
  // 0 starts first and leads (nobody else is queued); its callback then waits until the others
  // are queued. Thread i starts once threads 1..i-1 are queued (Stats().waiting is the
  // handshake), so the queue holds them in index order. Without group commit the waits time out
  // (10 s in all) and each caller commits alone. Returns each caller's Status.
  std::vector<Status> RunBatched(const std::vector<std::function<Status(Transaction&)>>& fns) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto wait_until = [&](const std::function<bool()>& pred) {
      while (!pred() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    };
    const int64_t n = static_cast<int64_t>(fns.size());
    std::vector<Status> out(fns.size());
    std::atomic<bool> leading{false};
    std::vector<std::thread> threads;
    threads.emplace_back([&] {
      out[0] = store_->Transact([&](Transaction& tx) -> Status {
        leading = true;
        wait_until([&] { return store_->Stats().waiting >= n - 1; });
        return fns[0](tx);
      });
    });
    wait_until([&] { return leading.load(); });
    for (int64_t i = 1; i < n; ++i) {
      wait_until([&] { return store_->Stats().waiting >= i - 1; });
      threads.emplace_back([&, i] { out[i] = store_->Transact(fns[i]); });
    }
    for (std::thread& t : threads) t.join();
    return out;
  }

  std::set<int64_t> WorkloadSeqs(const std::string& tenant) {
    std::set<int64_t> seqs;
    for (const WorkloadRecord& w :
         Read<WorkloadPage>([&](Transaction& tx) { return tx.ListWorkloads({.tenant = tenant}, 10000, ""); }).workloads) {
      seqs.insert(w.seq);
    }
    return seqs;
  }

  // A submit as the daemon does it: the workload, its idempotency answer and an audit record.
  Status Submit(Transaction& tx, const std::string& tenant, int64_t seq) {
    TESSERA_ASSIGN_OR_RETURN(int64_t id, tx.InsertWorkload(Workload(tenant, seq)));
    TESSERA_RETURN_IF_ERROR(
        tx.PutIdempotency({"tok", "key-" + std::to_string(seq), 201, "{\"id\":" + std::to_string(id) + "}", seq}));
    return tx.AppendAudit({seq, "tok", "workload.create", "workloads/" + std::to_string(id), "201"}).status();
  }

  std::string dir_, url_, base_url_;
  std::unique_ptr<testing::PgTestSchema> pg_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContractTest, TenantsCrud) {
  EXPECT_EQ(store_->Kind(), GetParam());
  TenantRecord root{"org", "", R"({"quota":{}})", 10, 10};
  TenantRecord child{"org.ml", "org", R"({"quota":{"gpu":4}})", 11, 11};
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.CreateTenant(root); }).ok());
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.CreateTenant(child); }).ok());
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.CreateTenant(root); }),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("org")));
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.CreateTenant({"x", "nobody", "{}", 1, 1}); }),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_EQ(Read<TenantRecord>([](Transaction& tx) { return tx.GetTenant("org.ml"); }), child);

  child.spec_json = R"({"quota":{"gpu":8}})";
  child.updated_ms = 20;
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.UpdateTenant(child); }).ok());
  EXPECT_EQ(Read<TenantRecord>([](Transaction& tx) { return tx.GetTenant("org.ml"); }), child);
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.UpdateTenant({"ghost", "", "{}", 1, 1}); }),
              StatusIs(StatusCode::kNotFound, HasSubstr("ghost")));
  EXPECT_EQ(Read<std::vector<TenantRecord>>([](Transaction& tx) { return tx.ListTenants(); }),
            (std::vector<TenantRecord>{root, child}));

  // A parent with children cannot go; the child can.
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.DeleteTenant("org"); }),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.DeleteTenant("org.ml"); }).ok());
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.GetTenant("org.ml").status(); }),
              StatusIs(StatusCode::kNotFound, HasSubstr("org.ml")));
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.DeleteTenant("org.ml"); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));
}

TEST_P(StoreContractTest, TokensCrud) {
  AddTenant("t1");
  TokenRecord admin{"tok-a", std::string(64, 'a'), "admin", "", std::nullopt, false, 5};
  TokenRecord user{"tok-u", std::string(64, 'b'), "tenant-user", "t1", int64_t{99000}, false, 6};
  TokenRecord agent{"tok-n", std::string(64, 'e'), "node-agent", "", std::nullopt, false, 8, "gpu-07"};
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.CreateToken(admin); }).ok());
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.CreateToken(user); }).ok());
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.CreateToken(agent); }).ok());
  EXPECT_EQ(Read<TokenRecord>([](Transaction& tx) { return tx.GetToken("tok-n"); }).node, "gpu-07");
  TokenRecord same_hash{"tok-x", admin.hash_hex, "admin", "", std::nullopt, false, 7};
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.CreateToken(same_hash); }),
              StatusIs(StatusCode::kAlreadyExists, ::testing::_));
  TokenRecord same_id{"tok-a", std::string(64, 'c'), "admin", "", std::nullopt, false, 7};
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.CreateToken(same_id); }),
              StatusIs(StatusCode::kAlreadyExists, ::testing::_));
  EXPECT_EQ(Read<TokenRecord>([](Transaction& tx) { return tx.GetToken("tok-u"); }), user);
  EXPECT_EQ(Read<TokenRecord>([&](Transaction& tx) { return tx.FindTokenByHash(admin.hash_hex); }), admin);
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.FindTokenByHash(std::string(64, 'f')).status(); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  ASSERT_TRUE(Tx([](Transaction& tx) { return tx.RevokeToken("tok-u"); }).ok());
  user.revoked = true;
  EXPECT_EQ(Read<std::vector<TokenRecord>>([](Transaction& tx) { return tx.ListTokens(); }),
            (std::vector<TokenRecord>{admin, agent, user}));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.RevokeToken("tok-none"); }),
              StatusIs(StatusCode::kNotFound, HasSubstr("tok-none")));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.GetToken("tok-none").status(); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  // A token's tenant must exist, and keeps the tenant from being deleted.
  EXPECT_THAT(Tx([](Transaction& tx) {
                return tx.CreateToken({"tok-z", std::string(64, 'd'), "tenant-user", "nope", std::nullopt, false, 1});
              }),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.DeleteTenant("t1"); }),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
}

TEST_P(StoreContractTest, NodesCrud) {
  NodeRecord a{"node-a", R"({"gpus":[{"model":"A100"}]})", NodeState::kReady, 100, "tok-n", "agent-1"};
  NodeRecord b{"node-b", "{}", NodeState::kReady, 101};
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.PutNode(b); }).ok());
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.PutNode(a); }).ok());
  a.state = NodeState::kCordoned;
  a.last_heartbeat_ms = 200;
  a.agent_token = "tok-m";
  a.agent_id = "agent-2";
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.PutNode(a); }).ok());  // replaces
  EXPECT_EQ(Read<NodeRecord>([](Transaction& tx) { return tx.GetNode("node-a"); }), a);
  EXPECT_EQ(Read<std::vector<NodeRecord>>([](Transaction& tx) { return tx.ListNodes(); }),
            (std::vector<NodeRecord>{a, b}));
  ASSERT_TRUE(Tx([](Transaction& tx) { return tx.DeleteNode("node-b"); }).ok());
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.GetNode("node-b").status(); }),
              StatusIs(StatusCode::kNotFound, HasSubstr("node-b")));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.DeleteNode("node-b"); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));
}

TEST_P(StoreContractTest, WorkloadsCrudAndOptimisticVersion) {
  AddTenant("t1");
  WorkloadRecord w = Workload("t1", 1);
  int64_t id1 = Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(w); });
  int64_t id2 = Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(Workload("t1", 2)); });
  EXPECT_GT(id1, 0);
  EXPECT_GT(id2, id1);
  w.id = id1;
  w.version = 1;
  EXPECT_EQ(Read<WorkloadRecord>([&](Transaction& tx) { return tx.GetWorkload(id1); }), w);

  // Two writers read version 1; the first update wins, the second is a conflict.
  WorkloadRecord first = w, second = w;
  first.state = WorkloadState::kRunning;
  first.placement_json = R"({"node":"n1","gpus":[0]})";
  first.wait_reason = "";
  first.start_ms = 5000;
  first.updated_ms = 5000;
  EXPECT_EQ(Read<int64_t>([&](Transaction& tx) { return tx.UpdateWorkload(first); }), 2);
  second.state = WorkloadState::kCancelled;
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.UpdateWorkload(second).status(); }),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("version is 2")));
  first.version = 2;
  EXPECT_EQ(Read<WorkloadRecord>([&](Transaction& tx) { return tx.GetWorkload(id1); }), first);

  WorkloadRecord ghost = w;
  ghost.id = id2 + 100;
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.UpdateWorkload(ghost).status(); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.InsertWorkload(Workload("nope", 3)).status(); }),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.DeleteTenant("t1"); }),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.DeleteWorkload(id2); }).ok());
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.GetWorkload(id2).status(); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.DeleteWorkload(id2); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  // Ids are never reused.
  int64_t id3 = Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(Workload("t1", 3)); });
  EXPECT_GT(id3, id2);
}

// The database keeps states as names; a row whose name this binary does not know (hand-edited,
// or written by a newer one) is an error naming the table, the row and the value, never a guess.
TEST_P(StoreContractTest, ARowWithAnUnknownStateIsRefusedNamingTableRowAndValue) {
  AddTenant("t1");
  const int64_t id = Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(Workload("t1", 1)); });
  ASSERT_TRUE(Tx([](Transaction& tx) { return tx.PutNode({.name = "node-a", .inventory_json = "{}"}); }).ok());
  ASSERT_TRUE(store_->ExecForTesting("UPDATE workloads SET state = 'hibernating'; UPDATE nodes SET state = 'melted'").ok());
  const auto names_workload = ::testing::AllOf(HasSubstr("workloads row " + std::to_string(id)), HasSubstr("'hibernating'"));
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.GetWorkload(id).status(); }),
              StatusIs(StatusCode::kInternal, names_workload));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.ListWorkloads({}, 10, "").status(); }),
              StatusIs(StatusCode::kInternal, names_workload));
  const auto names_node = ::testing::AllOf(HasSubstr("nodes row node-a"), HasSubstr("'melted'"));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.GetNode("node-a").status(); }), StatusIs(StatusCode::kInternal, names_node));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.ListNodes().status(); }), StatusIs(StatusCode::kInternal, names_node));
}

TEST_P(StoreContractTest, WorkloadEvents) {
  AddTenant("t1");
  int64_t id = Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(Workload("t1", 1)); });
  WorkloadEvent late{0, id, 300, "preempted", "reclaimed by tenant t2"};
  WorkloadEvent early{0, id, 200, "placed", "node n1"};
  late.id = Read<int64_t>([&](Transaction& tx) { return tx.AppendWorkloadEvent(late); });
  early.id = Read<int64_t>([&](Transaction& tx) { return tx.AppendWorkloadEvent(early); });
  EXPECT_EQ(Read<std::vector<WorkloadEvent>>([&](Transaction& tx) { return tx.ListWorkloadEvents(id); }),
            (std::vector<WorkloadEvent>{early, late}));
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.AppendWorkloadEvent({0, id + 50, 1, "x", ""}).status(); }),
              StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.DeleteWorkload(id); }).ok());
  EXPECT_TRUE(Read<std::vector<WorkloadEvent>>([&](Transaction& tx) { return tx.ListWorkloadEvents(id); }).empty());
}

TEST_P(StoreContractTest, WorkloadVersionPagesMatchTheFullPages) {
  AddTenant("t1");
  AddTenant("t2");
  for (int i = 0; i < 7; ++i)
    (void)Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(Workload(i % 3 ? "t1" : "t2", i)); });
  WorkloadRecord changed = Read<WorkloadPage>([](Transaction& tx) { return tx.ListWorkloads({.tenant = "t1"}, 1, ""); }).workloads.at(0);
  changed.state = WorkloadState::kRunning;
  (void)Read<int64_t>([&](Transaction& tx) { return tx.UpdateWorkload(changed); });
  for (const std::string tenant : {"t1", ""}) {
    std::string cont;
    do {
      WorkloadPage full = Read<WorkloadPage>([&](Transaction& tx) { return tx.ListWorkloads({.tenant = tenant}, 2, cont); });
      WorkloadPage thin = Read<WorkloadPage>([&](Transaction& tx) { return tx.ListWorkloadVersions({.tenant = tenant}, 2, cont); });
      ASSERT_EQ(thin.workloads.size(), full.workloads.size());
      EXPECT_EQ(thin.next_continue, full.next_continue);
      for (size_t i = 0; i < full.workloads.size(); ++i) {
        EXPECT_EQ(thin.workloads[i].id, full.workloads[i].id);
        EXPECT_EQ(thin.workloads[i].version, full.workloads[i].version);
        EXPECT_TRUE(thin.workloads[i].spec_json == "{}" && thin.workloads[i].tenant.empty());  // only id, version
      }
      cont = full.next_continue;
    } while (!cont.empty());
  }
  const WorkloadPage t1 = Read<WorkloadPage>([](Transaction& tx) { return tx.ListWorkloadVersions({.tenant = "t1"}, 100, ""); });
  ASSERT_FALSE(t1.workloads.empty());
  EXPECT_EQ(t1.workloads[0].id, changed.id);
  EXPECT_EQ(t1.workloads[0].version, changed.version + 1);  // updated once
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.ListWorkloadVersions({.tenant = "t1"}, 0, "").status(); }),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

TEST_P(StoreContractTest, EventsAfterAnIdAcrossWorkloadsWithTheirTenant) {
  AddTenant("t1");
  AddTenant("t2");
  EXPECT_EQ(Read<int64_t>([](Transaction& tx) { return tx.LastWorkloadEventId(); }), 0);
  const int64_t w1 = Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(Workload("t1", 1)); });
  const int64_t w2 = Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(Workload("t2", 1)); });
  std::vector<TenantWorkloadEvent> want;
  for (int i = 0; i < 5; ++i) {
    WorkloadEvent e{0, i % 2 ? w2 : w1, 100 + i, "placed", "event " + std::to_string(i)};
    e.id = Read<int64_t>([&](Transaction& tx) { return tx.AppendWorkloadEvent(e); });
    want.push_back({e, i % 2 ? "t2" : "t1"});
  }
  EXPECT_EQ(Read<int64_t>([](Transaction& tx) { return tx.LastWorkloadEventId(); }), want.back().event.id);
  EXPECT_EQ(Read<std::vector<TenantWorkloadEvent>>([](Transaction& tx) { return tx.ListEventsAfter(0, 100); }), want);
  // After an id, with a limit, in id order.
  EXPECT_EQ(Read<std::vector<TenantWorkloadEvent>>([&](Transaction& tx) {
              return tx.ListEventsAfter(want[1].event.id, 2);
            }),
            (std::vector<TenantWorkloadEvent>{want[2], want[3]}));
  EXPECT_TRUE(Read<std::vector<TenantWorkloadEvent>>([&](Transaction& tx) {
                return tx.ListEventsAfter(want.back().event.id, 10);
              }).empty());
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.ListEventsAfter(0, 0).status(); }),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  // A deleted workload takes its events out of the feed.
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.DeleteWorkload(w2); }).ok());
  EXPECT_EQ(Read<std::vector<TenantWorkloadEvent>>([](Transaction& tx) { return tx.ListEventsAfter(0, 100); }),
            (std::vector<TenantWorkloadEvent>{want[0], want[2], want[4]}));
}

// Object events (a node, tenant or token changed) share the workload events' sequence: one feed,
// in id order, each with its subject, name and scope; a deleted workload's events go, object
// events stay.
TEST_P(StoreContractTest, ObjectEventsShareTheFeedWithWorkloadEvents) {
  AddTenant("t1");
  const int64_t w1 = Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(Workload("t1", 1)); });
  WorkloadEvent placed{0, w1, 100, "placed", "n1 gpu 0"};
  placed.id = Read<int64_t>([&](Transaction& tx) { return tx.AppendWorkloadEvent(placed); });
  const ObjectEvent cordoned{"node", "n1", "", 101, "node.cordoned", "by tok-a"};
  const int64_t id2 = Read<int64_t>([&](Transaction& tx) { return tx.AppendObjectEvent(cordoned); });
  const ObjectEvent created{"tenant", "t2", "t1", 102, "tenant.created", ""};
  const int64_t id3 = Read<int64_t>([&](Transaction& tx) { return tx.AppendObjectEvent(created); });
  EXPECT_GT(id2, placed.id);
  EXPECT_GT(id3, id2);
  EXPECT_EQ(Read<int64_t>([](Transaction& tx) { return tx.LastWorkloadEventId(); }), id3);
  const TenantWorkloadEvent want_placed{placed, "t1", "workload", ""};
  const TenantWorkloadEvent want_cordoned{{id2, 0, 101, "node.cordoned", "by tok-a"}, "", "node", "n1"};
  const TenantWorkloadEvent want_created{{id3, 0, 102, "tenant.created", ""}, "t1", "tenant", "t2"};
  EXPECT_EQ(Read<std::vector<TenantWorkloadEvent>>([](Transaction& tx) { return tx.ListEventsAfter(0, 100); }),
            (std::vector<TenantWorkloadEvent>{want_placed, want_cordoned, want_created}));
  // Object events are not a workload's.
  EXPECT_EQ(Read<std::vector<WorkloadEvent>>([&](Transaction& tx) { return tx.ListWorkloadEvents(w1); }),
            (std::vector<WorkloadEvent>{placed}));
  EXPECT_THAT(Code([](Transaction& tx) { return tx.AppendObjectEvent({"workload", "7", "", 1, "x", ""}).status(); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("subject")));
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.DeleteWorkload(w1); }).ok());
  EXPECT_EQ(Read<std::vector<TenantWorkloadEvent>>([](Transaction& tx) { return tx.ListEventsAfter(0, 100); }),
            (std::vector<TenantWorkloadEvent>{want_cordoned, want_created}));
}

TEST_P(StoreContractTest, IdempotencyKeysReturnTheFirstAnswer) {
  IdempotencyRecord first{"tok-1", "key-1", 201, R"({"id":7,"state":"pending"})", 100};
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.PutIdempotency(first); }).ok());
  IdempotencyRecord retry{"tok-1", "key-1", 201, R"({"id":8,"state":"pending"})", 200};
  EXPECT_THAT(Tx([&](Transaction& tx) { return tx.PutIdempotency(retry); }),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("key-1")));
  EXPECT_EQ(Read<IdempotencyRecord>([](Transaction& tx) { return tx.GetIdempotency("tok-1", "key-1"); }), first);
  // The same key of another token is another request.
  IdempotencyRecord other{"tok-2", "key-1", 409, R"({"error":"x"})", 300};
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.PutIdempotency(other); }).ok());
  EXPECT_EQ(Read<IdempotencyRecord>([](Transaction& tx) { return tx.GetIdempotency("tok-2", "key-1"); }), other);
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.GetIdempotency("tok-1", "key-2").status(); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));

  // The daemon's pattern: the workload and the stored answer commit together, or neither does.
  AddTenant("t1");
  Status s = Tx([&](Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(int64_t id, tx.InsertWorkload(Workload("t1", 1)));
    TESSERA_RETURN_IF_ERROR(tx.PutIdempotency({"tok-1", "key-1", 201, std::to_string(id), 400}));
    return Status::Ok();
  });
  EXPECT_THAT(s, StatusIs(StatusCode::kAlreadyExists, ::testing::_));
  EXPECT_TRUE(Read<WorkloadPage>([](Transaction& tx) { return tx.ListWorkloads({.tenant = "t1"}, 10, ""); }).workloads.empty());
}

TEST_P(StoreContractTest, ErrorRollsBackEverything) {
  Status s = Tx([&](Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.CreateTenant({"t1", "", "{}", 1, 1}));
    TESSERA_RETURN_IF_ERROR(tx.InsertWorkload(Workload("t1", 1)).status());
    TESSERA_RETURN_IF_ERROR(tx.PutNode({"n1", "{}", NodeState::kReady, 1}));
    TESSERA_RETURN_IF_ERROR(tx.AppendAudit({1, "a", "b", "c", "d"}).status());
    // Reads inside see the transaction's own writes.
    TESSERA_RETURN_IF_ERROR(tx.GetTenant("t1").status());
    return Status(StatusCode::kAborted, "caller gave up");
  });
  EXPECT_THAT(s, StatusIs(StatusCode::kAborted, HasSubstr("caller gave up")));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.GetTenant("t1").status(); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  EXPECT_TRUE(Read<std::vector<NodeRecord>>([](Transaction& tx) { return tx.ListNodes(); }).empty());
  EXPECT_TRUE(Read<WorkloadPage>([](Transaction& tx) { return tx.ListWorkloads({}, 10, ""); }).workloads.empty());
  EXPECT_TRUE(Read<std::vector<AuditRecord>>([](Transaction& tx) { return tx.ListAudit(0, 10); }).empty());
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 0);
}

TEST_P(StoreContractTest, SwallowedStatementErrorStillRollsBack) {
  // A callback that ignores a failed statement and returns OK: the transaction is not committed
  // (PostgreSQL aborts at the first error; SQLite behaves the same through the store).
  Status s = Tx([&](Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.PutNode({"n1", "{}", NodeState::kReady, 1}));
    Status ignored = tx.InsertWorkload(Workload("no-such-tenant", 1)).status();
    EXPECT_THAT(ignored, StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
    return Status::Ok();
  });
  EXPECT_THAT(s, StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_TRUE(Read<std::vector<NodeRecord>>([](Transaction& tx) { return tx.ListNodes(); }).empty());
}

TEST_P(StoreContractTest, PaginationShowsEachWorkloadOfATenantOnce) {
  AddTenant("a");
  AddTenant("b");
  std::set<int64_t> inserted_a;
  ASSERT_TRUE(Tx([&](Transaction& tx) -> Status {
    for (int i = 0; i < 1300; ++i) {
      bool is_a = i % 13 < 10;  // 1,000 of a, 300 of b, interleaved
      TESSERA_ASSIGN_OR_RETURN(int64_t id, tx.InsertWorkload(Workload(is_a ? "a" : "b", i)));
      if (is_a) inserted_a.insert(id);
    }
    return Status::Ok();
  }).ok());
  ASSERT_EQ(inserted_a.size(), 1000u);

  std::set<int64_t> seen;
  std::string token;
  int pages = 0;
  do {
    WorkloadPage page = Read<WorkloadPage>([&](Transaction& tx) { return tx.ListWorkloads({.tenant = "a"}, 100, token); });
    ASSERT_EQ(page.workloads.size(), 100u) << "page " << pages;
    for (const WorkloadRecord& w : page.workloads) {
      EXPECT_EQ(w.tenant, "a");
      EXPECT_TRUE(seen.insert(w.id).second) << "workload " << w.id << " listed twice";
    }
    token = page.next_continue;
    ++pages;
    ASSERT_LE(pages, 10);
  } while (!token.empty());
  EXPECT_EQ(pages, 10);
  EXPECT_EQ(seen, inserted_a);

  // Every tenant's (the daemon's restart), in pages of 1,000.
  WorkloadPage all = Read<WorkloadPage>([](Transaction& tx) { return tx.ListWorkloads({}, 1000, ""); });
  EXPECT_EQ(all.workloads.size(), 1000u);
  WorkloadPage rest = Read<WorkloadPage>([&](Transaction& tx) { return tx.ListWorkloads({}, 1000, all.next_continue); });
  EXPECT_EQ(rest.workloads.size(), 300u);
  EXPECT_TRUE(rest.next_continue.empty());

  EXPECT_TRUE(Read<WorkloadPage>([](Transaction& tx) { return tx.ListWorkloads({.tenant = "c"}, 100, ""); }).workloads.empty());
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.ListWorkloads({.tenant = "a"}, 100, "bogus").status(); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bogus")));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.ListWorkloads({.tenant = "a"}, 0, "").status(); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("limit")));
}

// Issue 31: GET /v1/workloads?state= was ignored; the store filters by state, with the tenant or
// without, and pages the filtered list.
TEST_P(StoreContractTest, WorkloadListsFilterByState) {
  AddTenant("a");
  AddTenant("b");
  std::set<int64_t> running_a, running_all;
  ASSERT_TRUE(Tx([&](Transaction& tx) -> Status {
    for (int i = 0; i < 9; ++i) {
      WorkloadRecord w = Workload(i % 3 == 2 ? "b" : "a", i);
      if (i % 2 == 0) w.state = WorkloadState::kRunning;
      TESSERA_ASSIGN_OR_RETURN(int64_t id, tx.InsertWorkload(w));
      if (i % 2 == 0) running_all.insert(id);
      if (i % 2 == 0 && w.tenant == "a") running_a.insert(id);
    }
    return Status::Ok();
  }).ok());
  auto ids = [&](const WorkloadFilter& filter) {
    std::set<int64_t> out;
    std::string token;
    for (int pages = 0; pages < 10; ++pages) {
      WorkloadPage page = Read<WorkloadPage>([&](Transaction& tx) { return tx.ListWorkloads(filter, 2, token); });
      WorkloadPage thin = Read<WorkloadPage>([&](Transaction& tx) { return tx.ListWorkloadVersions(filter, 2, token); });
      EXPECT_EQ(thin.workloads.size(), page.workloads.size());
      for (const WorkloadRecord& w : page.workloads) {
        EXPECT_TRUE(!filter.state || w.state == *filter.state) << w.id << " " << WorkloadStateName(w.state);
        EXPECT_TRUE(filter.tenant.empty() || w.tenant == filter.tenant) << w.id << " " << w.tenant;
        out.insert(w.id);
      }
      token = page.next_continue;
      if (token.empty()) break;
    }
    return out;
  };
  EXPECT_EQ(ids({.tenant = "a", .state = WorkloadState::kRunning}), running_a);
  EXPECT_EQ(ids({.state = WorkloadState::kRunning}), running_all);
  EXPECT_EQ(ids({.state = WorkloadState::kPending}).size(), 9u - running_all.size());
  EXPECT_TRUE(ids({.state = WorkloadState::kCompleted}).empty());
  EXPECT_EQ(ids({.tenant = "b"}).size(), 3u);
}

TEST_P(StoreContractTest, AuditChainVerifies) {
  AppendAudits(5);
  std::vector<AuditRecord> log = Read<std::vector<AuditRecord>>([](Transaction& tx) { return tx.ListAudit(0, 100); });
  ASSERT_EQ(log.size(), 5u);
  std::string prev(kAuditGenesisHash);
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].seq, static_cast<int64_t>(i + 1));
    EXPECT_EQ(log[i].prev_hash, prev);
    EXPECT_EQ(log[i].hash, AuditHash(prev, log[i].seq, log[i].time_ms, log[i].actor, log[i].action,
                                     log[i].target, log[i].result));
    EXPECT_EQ(log[i].hash.size(), 64u);
    prev = log[i].hash;
  }
  EXPECT_EQ(Read<std::vector<AuditRecord>>([](Transaction& tx) { return tx.ListAudit(3, 100); }).size(), 2u);
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 5);
}

TEST_P(StoreContractTest, AuditChainDetectsAnEditedRecord) {
  AppendAudits(5);
  ASSERT_TRUE(store_->ExecForTesting("UPDATE audit SET actor = 'mallory' WHERE seq = 3").ok());
  AuditVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 3);
  EXPECT_THAT(v.problem, HasSubstr("hash does not match"));
}

TEST_P(StoreContractTest, AuditChainDetectsARemovedRecord) {
  AppendAudits(5);
  ASSERT_TRUE(store_->ExecForTesting("DELETE FROM audit WHERE seq = 3").ok());
  AuditVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 3);
  EXPECT_THAT(v.problem, HasSubstr("missing"));
}

TEST_P(StoreContractTest, AuditChainDetectsARemovedNewestRecord) {
  AppendAudits(5);
  ASSERT_TRUE(store_->ExecForTesting("DELETE FROM audit WHERE seq = 5").ok());
  AuditVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 5);
  EXPECT_THAT(v.problem, HasSubstr("removed"));
}

TEST_P(StoreContractTest, AuditChainDetectsAnInsertedRecord) {
  AppendAudits(5);
  std::vector<AuditRecord> log = Read<std::vector<AuditRecord>>([](Transaction& tx) { return tx.ListAudit(0, 100); });
  ASSERT_EQ(log.size(), 5u);
  // A forger inserts a well-formed record at seq 3 (chained to 2, its own hash right) and
  // renumbers 3..5 to 4..6, head included: the old record 3 no longer matches.
  std::string forged_hash = AuditHash(log[1].hash, 3, 103, "mallory", "token.create", "tokens/m", "201");
  ASSERT_TRUE(store_->ExecForTesting(
      "UPDATE audit SET seq = 6 WHERE seq = 5; UPDATE audit SET seq = 5 WHERE seq = 4; "
      "UPDATE audit SET seq = 4 WHERE seq = 3; "
      "INSERT INTO audit (seq, time_ms, actor, action, target, result, prev_hash, hash) VALUES "
      "(3, 103, 'mallory', 'token.create', 'tokens/m', '201', '" + log[1].hash + "', '" + forged_hash + "'); "
      "UPDATE audit_head SET seq = 6 WHERE id = 1").ok());
  AuditVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 4);

  // And a record simply added at the end, with an invented hash.
  ASSERT_TRUE(store_->ExecForTesting(
      "DELETE FROM audit; UPDATE audit_head SET seq = 0, hash = '" + std::string(kAuditGenesisHash) + "'").ok());
  AppendAudits(2);
  ASSERT_TRUE(store_->ExecForTesting(
      "INSERT INTO audit (seq, time_ms, actor, action, target, result, prev_hash, hash) VALUES "
      "(3, 1, 'mallory', 'x', 'y', 'z', 'abc', 'def')").ok());
  v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 3);
}

TEST_P(StoreContractTest, DurableAcrossReopen) {
  AddTenant("t1");
  int64_t id = Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(Workload("t1", 1)); });
  ASSERT_TRUE(Tx([](Transaction& tx) { return tx.PutIdempotency({"tok", "k", 201, "{}", 1}); }).ok());
  AppendAudits(3);
  WorkloadRecord before = Read<WorkloadRecord>([&](Transaction& tx) { return tx.GetWorkload(id); });
  Reopen();
  EXPECT_EQ(Read<WorkloadRecord>([&](Transaction& tx) { return tx.GetWorkload(id); }), before);
  EXPECT_EQ(Read<TenantRecord>([](Transaction& tx) { return tx.GetTenant("t1"); }).name, "t1");
  EXPECT_EQ(Read<IdempotencyRecord>([](Transaction& tx) { return tx.GetIdempotency("tok", "k"); }).status_code, 201);
  // The chain continues where it was.
  AuditRecord next = Read<AuditRecord>([](Transaction& tx) { return tx.AppendAudit({9, "a", "b", "c", "d"}); });
  EXPECT_EQ(next.seq, 4);
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 4);
}

TEST_P(StoreContractTest, MigratesAnEmptyDatabaseAndRefusesANewerSchema) {
  EXPECT_EQ(store_->SchemaVersion(), kSchemaVersion);
  Reopen();  // an up-to-date database opens again without migrating twice
  EXPECT_EQ(store_->SchemaVersion(), kSchemaVersion);
  ASSERT_TRUE(store_->ExecForTesting("INSERT INTO schema_migrations (version) VALUES (99)").ok());
  store_.reset();
  auto reopened = Open(url_);
  EXPECT_THAT(reopened, StatusIs(StatusCode::kFailedPrecondition, HasSubstr("schema version 99")));
}

// What schema version 7 added, taken away again (a database as a version 6 binary left it).
constexpr std::string_view kDropVersion7 =
    "ALTER TABLE usage_samples DROP COLUMN nvml_used_milli; ALTER TABLE usage_samples DROP COLUMN nvml_memory_mib; ";

// What schema version 6 added, taken away again (a database as a version 5 binary left it).
constexpr std::string_view kDropVersion6 = "DROP TABLE cluster_history; ";

// What schema version 5 added, taken away again (a database as a version 4 binary left it).
constexpr std::string_view kDropVersion5 = "DROP TABLE cluster_history; DROP TABLE sla_observations; ";

// What schema version 3 added, taken away again (a database as a version 2 binary left it).
constexpr std::string_view kDropVersion3 =
    "ALTER TABLE tokens DROP COLUMN node; ALTER TABLE nodes DROP COLUMN agent_token; "
    "ALTER TABLE nodes DROP COLUMN agent_id; ";

// What schema version 4 added, taken away again (the workload events' table as a version 3 binary
// left it: workload_id required, no subject, name or scope), for a store holding no object event.
std::string DropVersion4(const std::string& url) {
  if (url.starts_with("sqlite:"))
    return "CREATE TABLE workload_events_v3 (id INTEGER PRIMARY KEY AUTOINCREMENT, "
           "workload_id INTEGER NOT NULL REFERENCES workloads(id) ON DELETE CASCADE, time_ms INTEGER NOT NULL, "
           "kind TEXT NOT NULL, detail TEXT NOT NULL); "
           "INSERT INTO workload_events_v3 SELECT id, workload_id, time_ms, kind, detail FROM workload_events; "
           "DROP TABLE workload_events; ALTER TABLE workload_events_v3 RENAME TO workload_events; "
           "CREATE INDEX workload_events_by_workload ON workload_events (workload_id, time_ms, id); ";
  return "ALTER TABLE workload_events DROP COLUMN subject; ALTER TABLE workload_events DROP COLUMN name; "
         "ALTER TABLE workload_events DROP COLUMN scope; "
         "ALTER TABLE workload_events ALTER COLUMN workload_id SET NOT NULL; ";
}

// A database made by a binary of schema version 3 (workload events only) migrates to version 4
// and keeps its events with their ids; an object event then takes the next id.
TEST_P(StoreContractTest, MigratesAVersion3DatabaseToObjectEvents) {
  AddTenant("t1");
  const int64_t w1 = Read<int64_t>([&](Transaction& tx) { return tx.InsertWorkload(Workload("t1", 1)); });
  std::vector<TenantWorkloadEvent> want;
  for (int i = 0; i < 3; ++i) {
    WorkloadEvent e{0, w1, 100 + i, "placed", "event " + std::to_string(i)};
    e.id = Read<int64_t>([&](Transaction& tx) { return tx.AppendWorkloadEvent(e); });
    want.push_back({e, "t1"});
  }
  ASSERT_TRUE(store_->ExecForTesting(std::string(kDropVersion7) + std::string(kDropVersion5) + DropVersion4(url_) +
                                     "DELETE FROM schema_migrations WHERE version >= 4").ok());
  Reopen();
  EXPECT_EQ(store_->SchemaVersion(), kSchemaVersion);
  EXPECT_EQ(Read<std::vector<TenantWorkloadEvent>>([](Transaction& tx) { return tx.ListEventsAfter(0, 100); }), want);
  const int64_t next = Read<int64_t>([](Transaction& tx) { return tx.AppendObjectEvent({"node", "n1", "", 200, "node.lost", ""}); });
  EXPECT_GT(next, want.back().event.id);
}

// A database made by a binary of schema version 2 (no token node, no node agent identity)
// migrates to version 3 and keeps what it held; the new fields read "".
TEST_P(StoreContractTest, MigratesAVersion2DatabaseToNodeBoundTokens) {
  TokenRecord admin{"tok-a", std::string(64, 'a'), "admin", "", std::nullopt, false, 5};
  NodeRecord n{"node-a", "{}", NodeState::kReady, 100};
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.CreateToken(admin); }).ok());
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.PutNode(n); }).ok());
  ASSERT_TRUE(store_->ExecForTesting(std::string(kDropVersion7) + std::string(kDropVersion5) + DropVersion4(url_) +
                                     std::string(kDropVersion3) +
                                     "DELETE FROM schema_migrations WHERE version >= 3").ok());
  Reopen();
  EXPECT_EQ(store_->SchemaVersion(), kSchemaVersion);
  EXPECT_EQ(Read<TokenRecord>([](Transaction& tx) { return tx.GetToken("tok-a"); }), admin);
  EXPECT_EQ(Read<NodeRecord>([](Transaction& tx) { return tx.GetNode("node-a"); }), n);
  TokenRecord bound{"tok-b", std::string(64, 'b'), "node-agent", "", std::nullopt, false, 6, "node-a"};
  ASSERT_TRUE(Tx([&](Transaction& tx) { return tx.CreateToken(bound); }).ok());
  EXPECT_EQ(Read<TokenRecord>([](Transaction& tx) { return tx.GetToken("tok-b"); }), bound);
}

// A database made by a binary of schema version 1 (no usage_samples) migrates to the newest
// version and keeps what it held.
TEST_P(StoreContractTest, MigratesAVersion1DatabaseToUsageSamples) {
  AddTenant("t1");
  ASSERT_TRUE(store_->ExecForTesting(std::string(kDropVersion5) + "DROP TABLE usage_samples; " + DropVersion4(url_) +
                                     std::string(kDropVersion3) + "DELETE FROM schema_migrations WHERE version >= 2")
                  .ok());
  Reopen();
  EXPECT_EQ(store_->SchemaVersion(), kSchemaVersion);
  EXPECT_EQ(Read<TenantRecord>([](Transaction& tx) { return tx.GetTenant("t1"); }).name, "t1");
  EXPECT_TRUE(Read<bool>([](Transaction& tx) { return tx.PutUsageSample({"n1", "t1", "w1", "0", "A100-80GB", "whole", 0,
                                                                           3600, 3660, 60000, 30000, 6000, 100, 5, -1}); }));
}

UsageSampleRecord Sample(const std::string& tenant, const std::string& workload, int64_t seq, int64_t start,
                         int64_t end, const std::string& node = "n1") {
  return {node, tenant, workload, "0", "A100-80GB", "whole", seq, start, end, 1000 * (end - start), 500 * (end - start),
          1024 * (end - start), 1024, 7, -1};
}

TEST_P(StoreContractTest, UsageSampleResendIsANoOpAndOtherValuesAreRefused) {
  const UsageSampleRecord s = Sample("t1", "w1", 0, 100, 160);
  EXPECT_TRUE(Read<bool>([&](Transaction& tx) { return tx.PutUsageSample(s); }));
  EXPECT_FALSE(Read<bool>([&](Transaction& tx) { return tx.PutUsageSample(s); }));  // the resend
  UsageSampleRecord other = s;
  other.gpu_milli_s_used += 1;
  EXPECT_THAT(Code([&](Transaction& tx) { return tx.PutUsageSample(other).status(); }),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("gpu_milli_s_used")));
  other = s;
  other.tenant = "t2";
  EXPECT_THAT(Code([&](Transaction& tx) { return tx.PutUsageSample(other).status(); }),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("tenant")));
  // The same seq on another GPU, node or workload is another sample.
  for (std::string UsageSampleRecord::*part : {&UsageSampleRecord::gpu, &UsageSampleRecord::node,
                                               &UsageSampleRecord::workload}) {
    UsageSampleRecord k = s;
    k.*part += "x";
    EXPECT_TRUE(Read<bool>([&](Transaction& tx) { return tx.PutUsageSample(k); })) << k.*part;
  }
  std::vector<UsageSampleRecord> all =
      Read<std::vector<UsageSampleRecord>>([](Transaction& tx) { return tx.ListUsageSamples({}, 100); });
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0], s);  // every field as it was written
  Reopen();
  EXPECT_EQ(Read<std::vector<UsageSampleRecord>>([](Transaction& tx) { return tx.ListUsageSamples({}, 100); }), all);
}

TEST_P(StoreContractTest, SlaObservationsReplaceByKeyAndListByHourWindow) {
  auto put = [&](const SlaObservationRecord& o) {
    ASSERT_TRUE(store_->Transact([&](Transaction& tx) { return tx.PutSlaObservation(o); }).ok());
  };
  put({"b", "guaranteed_wait_p99_s", 7200, 1'500'000});
  put({"a", "guaranteed_wait_p99_s", 7200, 400'000'000});
  put({"a", "guaranteed_wait_p99_s", 3600, 2'000'000});
  put({"a", "guaranteed_wait_p99_s", 7200, 420'000'000});  // the same key: replaced
  auto list = [&](int64_t from, int64_t to) {
    return Read<std::vector<SlaObservationRecord>>([&](Transaction& tx) { return tx.ListSlaObservations(from, to); });
  };
  const std::vector<SlaObservationRecord> all = {{"a", "guaranteed_wait_p99_s", 3600, 2'000'000},
                                                 {"a", "guaranteed_wait_p99_s", 7200, 420'000'000},
                                                 {"b", "guaranteed_wait_p99_s", 7200, 1'500'000}};
  EXPECT_EQ(list(0, 10800), all);
  EXPECT_EQ(list(7200, 7201), std::vector<SlaObservationRecord>(all.begin() + 1, all.end()));
  EXPECT_TRUE(list(0, 3600).empty());
  Reopen();
  EXPECT_EQ(list(INT64_MIN, INT64_MAX), all);
}

TEST_P(StoreContractTest, HistoryPointsReplaceByTimeListFromATimeAndPruneBefore) {
  auto put = [&](const HistoryPointRecord& p) {
    ASSERT_TRUE(store_->Transact([&](Transaction& tx) { return tx.PutHistoryPoint(p); }).ok());
  };
  put({110, R"({"idle_gpus":2})"});
  put({100, R"({"idle_gpus":9})"});
  put({105, R"({"idle_gpus":3})"});
  put({110, R"({"idle_gpus":1})"});  // the same t_s: replaced
  auto list = [&](int64_t from) {
    return Read<std::vector<HistoryPointRecord>>([&](Transaction& tx) { return tx.ListHistoryPoints(from); });
  };
  const std::vector<HistoryPointRecord> all = {
      {100, R"({"idle_gpus":9})"}, {105, R"({"idle_gpus":3})"}, {110, R"({"idle_gpus":1})"}};
  EXPECT_EQ(list(0), all);
  EXPECT_EQ(list(105), std::vector<HistoryPointRecord>(all.begin() + 1, all.end()));
  EXPECT_TRUE(list(111).empty());
  EXPECT_EQ(Read<int64_t>([](Transaction& tx) { return tx.DeleteHistoryPointsBefore(105); }), 1);
  EXPECT_EQ(Read<int64_t>([](Transaction& tx) { return tx.DeleteHistoryPointsBefore(105); }), 0);
  Reopen();
  EXPECT_EQ(list(INT64_MIN), std::vector<HistoryPointRecord>(all.begin() + 1, all.end()));
}

// A version 5 database (as that binary left it) migrates to the cluster history and keeps its SLA
// observations.
TEST_P(StoreContractTest, MigratesAVersion5DatabaseToClusterHistory) {
  const SlaObservationRecord o{"a", "guaranteed_wait_p99_s", 3600, 2'000'000};
  ASSERT_TRUE(store_->Transact([&](Transaction& tx) { return tx.PutSlaObservation(o); }).ok());
  ASSERT_TRUE(store_->ExecForTesting(std::string(kDropVersion7) + std::string(kDropVersion6) +
                                     "DELETE FROM schema_migrations WHERE version >= 6")
                  .ok());
  Reopen();
  EXPECT_EQ(store_->SchemaVersion(), kSchemaVersion);
  EXPECT_EQ(Read<std::vector<SlaObservationRecord>>([](Transaction& tx) { return tx.ListSlaObservations(0, 7200); }),
            std::vector<SlaObservationRecord>{o});
  ASSERT_TRUE(store_->Transact([](Transaction& tx) { return tx.PutHistoryPoint({100, "{}"}); }).ok());
  const std::vector<HistoryPointRecord> want = {{100, "{}"}};
  EXPECT_EQ(Read<std::vector<HistoryPointRecord>>([](Transaction& tx) { return tx.ListHistoryPoints(0); }), want);
}

// A version 6 database migrates to NVML's figures: its samples read without them (absent, not
// zero); a sample with them keeps them; a resend that adds them is a resend, not a conflict.
TEST_P(StoreContractTest, MigratesAVersion6DatabaseToNvmlFiguresThatReadAbsentForOldSamples) {
  const UsageSampleRecord old = Sample("t1", "w1", 0, 100, 160);
  ASSERT_TRUE(Read<bool>([&](Transaction& tx) { return tx.PutUsageSample(old); }));
  ASSERT_TRUE(store_->ExecForTesting(std::string(kDropVersion7) + "DELETE FROM schema_migrations WHERE version >= 7")
                  .ok());
  Reopen();
  EXPECT_EQ(store_->SchemaVersion(), kSchemaVersion);
  UsageSampleRecord with = Sample("t1", "w1", 1, 160, 220);
  with.nvml_used_milli = 0;  // observed idle: stored as 0, not as absent
  with.nvml_memory_mib = 8706;
  ASSERT_TRUE(Read<bool>([&](Transaction& tx) { return tx.PutUsageSample(with); }));
  UsageSampleRecord resend = old;
  resend.nvml_used_milli = 550;
  EXPECT_FALSE(Read<bool>([&](Transaction& tx) { return tx.PutUsageSample(resend); }));
  Reopen();
  const std::vector<UsageSampleRecord> all =
      Read<std::vector<UsageSampleRecord>>([](Transaction& tx) { return tx.ListUsageSamples({}, 100); });
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0], old);
  EXPECT_FALSE(all[0].nvml_used_milli.has_value());
  EXPECT_FALSE(all[0].nvml_memory_mib.has_value());
  EXPECT_EQ(all[1], with);
  EXPECT_EQ(all[1].nvml_used_milli, 0);
}

TEST_P(StoreContractTest, UsageSamplesListBySubtreeTimeWindowAndPages) {
  AddTenant("acme");
  AddTenant("vision", "acme");
  AddTenant("ranking", "vision");
  AddTenant("other");
  ASSERT_TRUE(Tx([&](Transaction& tx) -> Status {
    for (const UsageSampleRecord& u :
         {Sample("acme", "a", 0, 0, 100), Sample("vision", "v", 0, 100, 200), Sample("ranking", "r", 0, 200, 300),
          Sample("ranking", "r", 1, 300, 400), Sample("other", "o", 0, 0, 400), Sample("gone", "g", 0, 0, 10)}) {
      TESSERA_RETURN_IF_ERROR(tx.PutUsageSample(u).status());
    }
    return Status::Ok();
  }).ok());
  auto list = [&](UsageFilter f, int limit = 100) {
    std::vector<std::string> out;
    for (const UsageSampleRecord& u :
         Read<std::vector<UsageSampleRecord>>([&](Transaction& tx) { return tx.ListUsageSamples(f, limit); }))
      out.push_back(u.workload + std::to_string(u.seq));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(list({}), (V{"a0", "g0", "o0", "r0", "r1", "v0"}));  // every tenant's, deleted ones too, by key
  EXPECT_EQ(list({"acme"}), (V{"a0", "r0", "r1", "v0"}));
  EXPECT_EQ(list({"vision"}), (V{"r0", "r1", "v0"}));
  EXPECT_EQ(list({"ranking"}), (V{"r0", "r1"}));
  EXPECT_EQ(list({"nobody"}), V{});
  // Spans overlapping [from, to): [100, 300) takes v0 and r0, not a0 (ends at 100) nor r1 (starts at 300).
  EXPECT_EQ(list({"acme", 100, 300}), (V{"r0", "v0"}));
  EXPECT_EQ(list({"", 399, 1000}), (V{"o0", "r1"}));
  // Pages: each sample once.
  V paged;
  UsageFilter f;
  for (;;) {
    std::vector<UsageSampleRecord> page =
        Read<std::vector<UsageSampleRecord>>([&](Transaction& tx) { return tx.ListUsageSamples(f, 4); });
    for (const UsageSampleRecord& u : page) paged.push_back(u.workload + std::to_string(u.seq));
    if (page.size() < 4) break;
    const UsageSampleRecord& last = page.back();
    f.after = UsageSampleKey{last.node, last.workload, last.gpu, last.seq};
  }
  EXPECT_EQ(paged, list({}));
  EXPECT_THAT(Code([](Transaction& tx) { return tx.ListUsageSamples({}, 0).status(); }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("limit")));
}

TEST_P(StoreContractTest, ConcurrentWritersThroughOneAndTwoStores) {
  AddTenant("t1");
  auto other = Open(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  std::unique_ptr<Store> second = std::move(other).value();
  constexpr int kPerThread = 30;
  auto writer = [&](Store* s, int base) {
    for (int i = 0; i < kPerThread; ++i) {
      Status st = s->Transact([&](Transaction& tx) -> Status {
        TESSERA_RETURN_IF_ERROR(tx.InsertWorkload(Workload("t1", base + i)).status());
        return tx.AppendAudit({base + i, "w", "workload.create", "x", "201"}).status();
      });
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
  };
  std::thread t1(writer, store_.get(), 0), t2(writer, store_.get(), 1000), t3(writer, second.get(), 2000);
  t1.join();
  t2.join();
  t3.join();
  WorkloadPage page = Read<WorkloadPage>([](Transaction& tx) { return tx.ListWorkloads({.tenant = "t1"}, 1000, ""); });
  EXPECT_EQ(page.workloads.size(), 3u * kPerThread);
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 3 * kPerThread);
}

// --- group commit (concurrent Transact callers share one database commit) --------------------
// Each test forces one batch with RunBatched and checks Stats(): commits grow by one for the
// whole batch. Named Concurrent* so that `make tsan` runs them.

TEST_P(StoreContractTest, ConcurrentCallersShareOneDurableCommit) {
  AddTenant("t1");
  const StoreStats before = store_->Stats();
  std::vector<std::function<Status(Transaction&)>> fns;
  for (int i = 0; i < 8; ++i) fns.push_back([&, i](Transaction& tx) { return Submit(tx, "t1", i); });
  for (const Status& s : RunBatched(fns)) EXPECT_TRUE(s.ok()) << s.ToString();
  const StoreStats after = store_->Stats();
  EXPECT_EQ(after.transactions - before.transactions, 8);
  EXPECT_EQ(after.commits - before.commits, 1) << "the 8 callers were not batched into one commit";
  EXPECT_EQ(after.waiting, 0);
  Reopen();  // acknowledged means on disk
  EXPECT_EQ(WorkloadSeqs("t1"), (std::set<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 8);
}

TEST_P(StoreContractTest, ConcurrentFailingCallbacksDoNotRollBackTheirBatch) {
  AddTenant("t1");
  const StoreStats before = store_->Stats();
  std::vector<std::function<Status(Transaction&)>> fns;
  for (int i = 0; i < 6; ++i) {
    fns.push_back([&, i](Transaction& tx) -> Status {
      TESSERA_RETURN_IF_ERROR(Submit(tx, "t1", i));
      if (i % 2 == 1) return Status(StatusCode::kAborted, "caller " + std::to_string(i) + " gave up");
      return Status::Ok();
    });
  }
  std::vector<Status> got = RunBatched(fns);
  for (int i = 0; i < 6; ++i) {
    if (i % 2 == 0) {
      EXPECT_TRUE(got[i].ok()) << i << ": " << got[i].ToString();
    } else {
      EXPECT_THAT(got[i], StatusIs(StatusCode::kAborted, HasSubstr("caller " + std::to_string(i))));
    }
  }
  EXPECT_EQ(store_->Stats().commits - before.commits, 1);
  EXPECT_EQ(WorkloadSeqs("t1"), (std::set<int64_t>{0, 2, 4}));
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.GetIdempotency("tok", "key-1").status(); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  // The rolled-back callbacks' audit appends are gone, head included: the chain is 1..3.
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 3);
  std::vector<AuditRecord> log = Read<std::vector<AuditRecord>>([](Transaction& tx) { return tx.ListAudit(0, 100); });
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[2].seq, 3);
}

TEST_P(StoreContractTest, ConcurrentCallbackFailingAfterWritingLeavesNothing) {
  AddTenant("t1");
  const StoreStats before = store_->Stats();
  std::vector<Status> got = RunBatched({
      [&](Transaction& tx) { return Submit(tx, "t1", 0); },
      // Writes every kind of record, then fails.
      [&](Transaction& tx) -> Status {
        TESSERA_RETURN_IF_ERROR(tx.CreateTenant({"t-bad", "", "{}", 1, 1}));
        TESSERA_RETURN_IF_ERROR(tx.CreateToken({"tok-bad", "hash-bad", "tenant-user", "t-bad", std::nullopt, false, 1}));
        TESSERA_RETURN_IF_ERROR(tx.PutNode({"n-bad", "{}", NodeState::kReady, 1}));
        TESSERA_RETURN_IF_ERROR(tx.UpdateTenant({"t1", "", R"({"changed":true})", 1, 2}));
        TESSERA_ASSIGN_OR_RETURN(int64_t id, tx.InsertWorkload(Workload("t-bad", 1)));
        TESSERA_RETURN_IF_ERROR(tx.AppendWorkloadEvent({0, id, 5, "placed", "n-bad"}).status());
        TESSERA_RETURN_IF_ERROR(tx.PutIdempotency({"tok", "key-bad", 201, "{}", 1}));
        TESSERA_RETURN_IF_ERROR(tx.AppendAudit({1, "tok", "tenant.create", "tenants/t-bad", "201"}).status());
        return Status(StatusCode::kAborted, "changed its mind");
      },
      // Ignores a failed statement (an unknown tenant: a foreign key error, which aborts a
      // PostgreSQL transaction) and returns OK: its writes are undone all the same.
      [&](Transaction& tx) -> Status {
        TESSERA_RETURN_IF_ERROR(tx.PutNode({"n-swallowed", "{}", NodeState::kReady, 1}));
        Status ignored = tx.InsertWorkload(Workload("no-such-tenant", 2)).status();
        EXPECT_THAT(ignored, StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
        return Status::Ok();
      },
      [&](Transaction& tx) { return Submit(tx, "t1", 3); },
  });
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_THAT(got[1], StatusIs(StatusCode::kAborted, HasSubstr("changed its mind")));
  EXPECT_THAT(got[2], StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_TRUE(got[3].ok()) << got[3].ToString();
  EXPECT_EQ(store_->Stats().commits - before.commits, 1);
  EXPECT_EQ(WorkloadSeqs("t1"), (std::set<int64_t>{0, 3}));
  EXPECT_TRUE(WorkloadSeqs("").count(1) == 0);
  EXPECT_EQ(Read<std::vector<TenantRecord>>([](Transaction& tx) { return tx.ListTenants(); }),
            (std::vector<TenantRecord>{{"t1", "", "{}", 1, 1}}));
  EXPECT_TRUE(Read<std::vector<TokenRecord>>([](Transaction& tx) { return tx.ListTokens(); }).empty());
  EXPECT_TRUE(Read<std::vector<NodeRecord>>([](Transaction& tx) { return tx.ListNodes(); }).empty());
  EXPECT_THAT(Tx([](Transaction& tx) { return tx.GetIdempotency("tok", "key-bad").status(); }),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 2);
}

TEST_P(StoreContractTest, ConcurrentAlreadyExistsDoesNotPoisonTheBatch) {
  AddTenant("t1");
  ASSERT_TRUE(Tx([](Transaction& tx) { return tx.PutIdempotency({"tok", "key-1", 201, "first", 1}); }).ok());
  const StoreStats before = store_->Stats();
  std::vector<Status> got = RunBatched({
      [&](Transaction& tx) { return Submit(tx, "t1", 0); },
      // A retried POST whose key already has an answer: its insert is undone.
      [&](Transaction& tx) { return Submit(tx, "t1", 1); },
      // A callback that meets AlreadyExists, reacts to it and carries on.
      [&](Transaction& tx) -> Status {
        Status dup = tx.CreateTenant({"t1", "", "{}", 1, 1});
        if (dup.code() != StatusCode::kAlreadyExists) return InternalError("expected AlreadyExists: " + dup.ToString());
        return Submit(tx, "t1", 2);
      },
      [&](Transaction& tx) { return Submit(tx, "t1", 3); },
  });
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_THAT(got[1], StatusIs(StatusCode::kAlreadyExists, HasSubstr("key-1")));
  EXPECT_TRUE(got[2].ok()) << got[2].ToString();
  EXPECT_TRUE(got[3].ok()) << got[3].ToString();
  EXPECT_EQ(store_->Stats().commits - before.commits, 1);
  EXPECT_EQ(WorkloadSeqs("t1"), (std::set<int64_t>{0, 2, 3}));
  EXPECT_EQ(Read<IdempotencyRecord>([](Transaction& tx) { return tx.GetIdempotency("tok", "key-1"); }).body, "first");
  EXPECT_EQ(Read<IdempotencyRecord>([](Transaction& tx) { return tx.GetIdempotency("tok", "key-3"); }).status_code, 201);
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 3);
}

TEST_P(StoreContractTest, ConcurrentReadsSeeEarlierCallbacksOfTheBatch) {
  const StoreStats before = store_->Stats();
  std::vector<Status> got = RunBatched({
      [](Transaction& tx) { return tx.CreateTenant({"a", "", "{}", 1, 1}); },
      [&](Transaction& tx) -> Status {
        TESSERA_RETURN_IF_ERROR(tx.GetTenant("a").status());  // written by the callback before
        return tx.InsertWorkload(Workload("a", 1)).status();
      },
  });
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_TRUE(got[1].ok()) << got[1].ToString();
  EXPECT_EQ(store_->Stats().commits - before.commits, 1);
  EXPECT_EQ(WorkloadSeqs("a"), (std::set<int64_t>{1}));
}

TEST_P(StoreContractTest, ConcurrentCommitFailureFailsEveryCallerOfTheBatch) {
  AddTenant("t1");
  // A node whose name must be a tenant's, checked only at COMMIT (a deferred foreign key): a
  // batch with a bad node fails as a whole when it commits.
  ASSERT_TRUE(store_->ExecForTesting(
      "DROP TABLE nodes; CREATE TABLE nodes (name TEXT PRIMARY KEY REFERENCES tenants(name) DEFERRABLE "
      "INITIALLY DEFERRED, inventory_json TEXT NOT NULL, state TEXT NOT NULL, last_heartbeat_ms BIGINT NOT NULL, "
      "agent_token TEXT NOT NULL DEFAULT '', agent_id TEXT NOT NULL DEFAULT '')").ok());
  const StoreStats before = store_->Stats();
  std::vector<Status> got = RunBatched({
      [&](Transaction& tx) { return Submit(tx, "t1", 0); },
      [](Transaction& tx) { return tx.PutNode({"ghost", "{}", NodeState::kReady, 1}); },
      [&](Transaction& tx) { return Submit(tx, "t1", 2); },
  });
  for (const Status& s : got) EXPECT_THAT(s, StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_EQ(store_->Stats().commits - before.commits, 0);
  EXPECT_TRUE(WorkloadSeqs("t1").empty());
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 0);
  // The store carries on.
  EXPECT_TRUE(Tx([&](Transaction& tx) { return Submit(tx, "t1", 3); }).ok());
  EXPECT_TRUE(Tx([](Transaction& tx) { return tx.PutNode({"t1", "{}", NodeState::kReady, 1}); }).ok());
  EXPECT_EQ(WorkloadSeqs("t1"), (std::set<int64_t>{3}));
}

TEST_P(StoreContractTest, ConcurrentBatchesAreBoundedByMaxBatch) {
  Options options;
  options.max_batch = 3;
  Reopen(options);
  AddTenant("t1");
  const StoreStats before = store_->Stats();
  std::vector<std::function<Status(Transaction&)>> fns;
  for (int i = 0; i < 7; ++i) fns.push_back([&, i](Transaction& tx) { return Submit(tx, "t1", i); });
  for (const Status& s : RunBatched(fns)) EXPECT_TRUE(s.ok()) << s.ToString();
  // 7 callers queued at once, at most 3 per commit: 3 + 3 + 1.
  EXPECT_EQ(store_->Stats().commits - before.commits, 3);
  EXPECT_EQ(store_->Stats().transactions - before.transactions, 7);
  EXPECT_EQ(WorkloadSeqs("t1").size(), 7u);
}

// A callback that throws (library code does not, but a daemon's might) fails alone with
// Internal, its writes undone; the batch's other callers commit and the store carries on.
TEST_P(StoreContractTest, ConcurrentThrowingCallbackFailsAlone) {
  AddTenant("t1");
  std::vector<Status> got = RunBatched({
      [&](Transaction& tx) { return Submit(tx, "t1", 0); },
      [&](Transaction& tx) -> Status {
        TESSERA_RETURN_IF_ERROR(Submit(tx, "t1", 1));
        throw std::runtime_error("boom");
      },
      [&](Transaction& tx) { return Submit(tx, "t1", 2); },
  });
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_THAT(got[1], StatusIs(StatusCode::kInternal, HasSubstr("threw")));
  EXPECT_TRUE(got[2].ok()) << got[2].ToString();
  EXPECT_EQ(WorkloadSeqs("t1"), (std::set<int64_t>{0, 2}));
  EXPECT_TRUE(Tx([&](Transaction& tx) { return Submit(tx, "t1", 3); }).ok());
}

// Free-running submitters (16 threads, as HTTP handlers), a third of them failing after they
// wrote: exactly the successful ones are stored, the audit chain holds, and commits were shared.
TEST_P(StoreContractTest, ConcurrentSubmittersWithMixedOutcomes) {
  AddTenant("t1");
  constexpr int kThreads = 16, kPerThread = 20;
  const StoreStats before = store_->Stats();
  std::vector<std::thread> threads;
  std::vector<Status> got(kThreads * kPerThread);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        const int seq = t * kPerThread + k;
        got[seq] = store_->Transact([&](Transaction& tx) -> Status {
          TESSERA_RETURN_IF_ERROR(Submit(tx, "t1", seq));
          if (seq % 3 == 0) return Status(StatusCode::kAborted, "no");
          return Status::Ok();
        });
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const StoreStats after = store_->Stats();
  std::set<int64_t> want;
  for (int seq = 0; seq < kThreads * kPerThread; ++seq) {
    if (seq % 3 == 0) {
      EXPECT_THAT(got[seq], StatusIs(StatusCode::kAborted, ::testing::_));
    } else {
      EXPECT_TRUE(got[seq].ok()) << seq << ": " << got[seq].ToString();
      want.insert(seq);
    }
  }
  EXPECT_EQ(WorkloadSeqs("t1"), want);
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, static_cast<int64_t>(want.size()));
  EXPECT_EQ(after.transactions - before.transactions, kThreads * kPerThread);
  EXPECT_LT(after.commits - before.commits, static_cast<int64_t>(want.size()));
}

// TransactAsync: the caller does not wait. Eight asynchronous submits queued while a Transact
// caller leads are taken into its batch (one commit), each done is called once with its own
// outcome after the commit; alone, the store's writer thread leads; a Store destroyed with calls
// still queued runs them and calls their done first.
TEST_P(StoreContractTest, ConcurrentAsyncCallersJoinTheGroupCommitAndAreDoneOnce) {
  AddTenant("t1");
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, Status> done;
  std::map<int, int> calls;
  auto submit_async = [&](int seq) {
    store_->TransactAsync(
        [this, seq](Transaction& tx) -> Status {
          TESSERA_RETURN_IF_ERROR(Submit(tx, "t1", seq));
          return seq % 3 == 0 ? Status(StatusCode::kAborted, "no") : Status::Ok();
        },
        [&, seq](Status st) {
          std::lock_guard<std::mutex> lock(mu);
          done[seq] = st;
          ++calls[seq];
          cv.notify_all();
        });
  };
  auto wait_done = [&](size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return done.size() >= n; });
  };
  const StoreStats before = store_->Stats();
  std::atomic<bool> leading{false};
  std::thread leader([&] {
    EXPECT_TRUE(store_->Transact([&](Transaction& tx) -> Status {
      leading = true;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (store_->Stats().waiting < 8 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      return Submit(tx, "t1", 100);
    }).ok());
  });
  while (!leading) std::this_thread::yield();
  for (int seq = 0; seq < 8; ++seq) submit_async(seq);  // returns at once: the leader is busy
  leader.join();
  ASSERT_TRUE(wait_done(8));
  EXPECT_EQ(store_->Stats().commits - before.commits, 1) << "the asynchronous callers were not batched";
  std::set<int64_t> want = {100};
  for (int seq = 0; seq < 8; ++seq) {
    if (seq % 3 == 0) {
      EXPECT_THAT(done[seq], StatusIs(StatusCode::kAborted, ::testing::_)) << seq;
    } else {
      EXPECT_TRUE(done[seq].ok()) << seq << ": " << done[seq].ToString();
      want.insert(seq);
    }
  }
  EXPECT_EQ(WorkloadSeqs("t1"), want);
  // Alone: the writer thread leads.
  submit_async(10);
  ASSERT_TRUE(wait_done(9));
  EXPECT_TRUE(done[10].ok()) << done[10].ToString();
  // Destroyed with calls queued: they run, and are done, before the destructor returns.
  for (int seq = 11; seq < 16; ++seq) submit_async(seq);
  store_.reset();
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(done.size(), 14u);
    for (const auto& [seq, n] : calls) EXPECT_EQ(n, 1) << "done of " << seq << " called " << n << " times";
  }
  Reopen();
  want.insert({10, 11, 13, 14});  // 12 and 15 failed (seq % 3 == 0)
  EXPECT_EQ(WorkloadSeqs("t1"), want);
  AuditVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
}

// SQLite: a writer that waits past the busy timeout for another's lock. PostgreSQL: the server
// drops the store's connection; the store reconnects at the next transaction.
TEST_P(StoreContractTest, UnreachableOrLockedIsUnavailable) {
  AddTenant("t1");
  if (GetParam() == "sqlite") {
    Options quick;
    quick.busy_timeout_ms = 50;
    auto other = Open(url_, quick);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    Status inner;
    ASSERT_TRUE(Tx([&](Transaction& tx) -> Status {
      TESSERA_RETURN_IF_ERROR(tx.PutNode({"n1", "{}", NodeState::kReady, 1}));  // holds the write lock
      inner = (*other)->Transact([](Transaction& tx2) { return tx2.PutNode({"n2", "{}", NodeState::kReady, 1}); });
      return Status::Ok();
    }).ok());
    EXPECT_THAT(inner, StatusIs(StatusCode::kUnavailable, HasSubstr("locked")));
  } else {
    ASSERT_TRUE(testing::PgAdmin(base_url_, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                                   "pid <> pg_backend_pid() AND datname = current_database() AND "
                                   "backend_type = 'client backend'"));
    EXPECT_THAT(Tx([](Transaction& tx) { return tx.PutNode({"n2", "{}", NodeState::kReady, 1}); }),
                StatusIs(StatusCode::kUnavailable, ::testing::_));
  }
  // The next transaction works again.
  EXPECT_TRUE(Tx([](Transaction& tx) { return tx.PutNode({"n3", "{}", NodeState::kReady, 1}); }).ok());
  EXPECT_EQ(Read<std::vector<NodeRecord>>([](Transaction& tx) { return tx.ListNodes(); }).size(),
            GetParam() == "sqlite" ? 2u : 1u);
}

// --- ownership: one control plane per store (store.h, Ownership) -----------------------------

TEST_P(StoreContractTest, OneStoreOwnsTheDatabaseUntilItIsGone) {
  EXPECT_THAT(store_->CheckOwnership(), StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not acquired")));
  const OwnerIdentity first{4242, "host-a", 1'790'000'000'000};
  StatusOr<OwnershipClaim> mine = store_->TryAcquireOwnership(first);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_TRUE(mine->acquired);
  EXPECT_TRUE(store_->CheckOwnership().ok());
  mine = store_->TryAcquireOwnership(first);  // again: still ours
  ASSERT_TRUE(mine.ok() && mine->acquired);

  auto other = Open(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  const OwnerIdentity second{4343, "host-b", 1'790'000'001'000};
  StatusOr<OwnershipClaim> theirs = (*other)->TryAcquireOwnership(second);
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_FALSE(theirs->acquired);
  EXPECT_EQ(theirs->holder, first);
  EXPECT_THAT((*other)->CheckOwnership(), StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  // Ownership does not lock the data: the other store still reads and writes.
  EXPECT_TRUE((*other)->Transact([](Transaction& tx) { return tx.PutNode({"n1", "{}", NodeState::kReady, 1}); }).ok());

  // The owner goes away (PostgreSQL: its lease session ends, which the server notices a moment
  // after the client closed it): the other store gets it.
  store_.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    theirs = (*other)->TryAcquireOwnership(second);
    ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
    if (!theirs->acquired) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (!theirs->acquired && std::chrono::steady_clock::now() < deadline);
  EXPECT_TRUE(theirs->acquired);
  EXPECT_TRUE((*other)->CheckOwnership().ok());
  // And a third one now finds the second as the holder.
  Reopen();
  StatusOr<OwnershipClaim> third = store_->TryAcquireOwnership({4444, "host-c", 1'790'000'002'000});
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_FALSE(third->acquired);
  EXPECT_EQ(third->holder, second);
}

// A lock file left behind by an owner that died (here: written by hand, never locked) names a
// process that is gone; it blocks nobody, and the new owner's record replaces it.
TEST_P(StoreContractTest, AStaleSqliteOwnerFileDoesNotBlock) {
  if (GetParam() != "sqlite") GTEST_SKIP() << "the lock file is SQLite's";
  const std::string lock_file = dir_ + "/tessera.db.owner";
  {
    std::ofstream stale(lock_file);
    stale << "pid=999999\nhost=gone\nsince_ms=1\n";
  }
  StatusOr<OwnershipClaim> mine = store_->TryAcquireOwnership({4242, "host-a", 1'790'000'000'000});
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_TRUE(mine->acquired);
  std::ifstream in(lock_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "pid=4242\nhost=host-a\nsince_ms=1790000000000\n");
}

// The leader lease lives as long as its session: a terminated session is a lost lease, which
// CheckOwnership reports (the daemon then stops scheduling), and a standby can take it.
TEST_P(StoreContractTest, APostgresLeaderWhoseSessionEndsLosesTheLease) {
  if (GetParam() != "postgresql") GTEST_SKIP() << "a SQLite owner cannot lose its lock";
  StatusOr<OwnershipClaim> mine = store_->TryAcquireOwnership({4242, "host-a", 1'790'000'000'000});
  ASSERT_TRUE(mine.ok() && mine->acquired) << mine.status().ToString();
  // pg_terminate_backend(pid, 5000): returns once the session is gone (PostgreSQL 14+).
  ASSERT_TRUE(testing::PgAdmin(base_url_, "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE "
                                          "pid <> pg_backend_pid() AND datname = current_database() AND "
                                          "backend_type = 'client backend'"));
  EXPECT_THAT(store_->CheckOwnership(), StatusIs(StatusCode::kUnavailable, HasSubstr("lost the store's leader lease")));
  auto other = Open(url_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  StatusOr<OwnershipClaim> theirs = (*other)->TryAcquireOwnership({4343, "host-b", 1'790'000'001'000});
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_TRUE(theirs->acquired);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return std::string(p.param == "sqlite" ? "Sqlite" : "Postgres");
                         });

TEST(StoreOpen, BadUrlsAreClearErrors) {
  EXPECT_THAT(Open(""), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(Open("sqlite:"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("path")));
  EXPECT_THAT(Open("sqlite:/nonexistent-dir-of-tessera/x.db"),
              StatusIs(StatusCode::kUnavailable, HasSubstr("/nonexistent-dir-of-tessera/x.db")));
  EXPECT_THAT(Open("postgresql:///x?host=/nonexistent-dir-of-tessera&connect_timeout=2"),
              StatusIs(StatusCode::kUnavailable, HasSubstr("cannot connect")));
}

TEST(StoreOpen, PlainPathIsSqlite) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-store-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  {
    auto s = Open(tmpl + "/plain.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ((*s)->Kind(), "sqlite");
  }
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace tessera::store
