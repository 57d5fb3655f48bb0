// `tessera audit verify --db URL` against SQLite stores written through the store API: an intact
// chain is OK (exit 0, the record count); an edited, an inserted and a removed record (middle and
// newest), tampered through raw SQL, are each detected (exit 1, naming the first bad seq); a
// database that cannot be opened is bad input (exit 2, one line) and is never created.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tessera/store/store.h"
#include "tests/testing/cli_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::RunTessera;
using testing::TempDir;

// A store in `dir` with `n` audit records (seq 1..n); `tamper` (raw SQL) is run on it afterwards.
std::string MakeStore(const TempDir& dir, int n, const std::string& tamper = "") {
  const std::string url = "sqlite:" + dir.File("tessera.db");
  auto opened = store::Open(url);
  EXPECT_TRUE(opened.ok()) << opened.status().ToString();
  if (!opened.ok()) return url;
  std::unique_ptr<store::Store> db = std::move(opened).value();
  Status s = db->Transact([&](store::Transaction& tx) -> Status {
    for (int i = 1; i <= n; ++i) {
      TESSERA_RETURN_IF_ERROR(tx.AppendAudit({1000 + i, "tok-" + std::to_string(i), "workload.create",
                                              "workloads/" + std::to_string(i), "201"})
                                  .status());
    }
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!tamper.empty()) {
    Status t = db->ExecForTesting(tamper);
    EXPECT_TRUE(t.ok()) << t.ToString();
  }
  return url;
}

CommandResult Verify(const TempDir& dir, const std::string& url, const std::string& extra = "") {
  return RunTessera(dir, "audit verify --db '" + url + "'" + extra);
}

void ExpectBroken(const CommandResult& r, int seq, const std::string& why) {
  EXPECT_FALSE(r.Crashed());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("audit chain BROKEN at seq " + std::to_string(seq) + ": seq " + std::to_string(seq)));
  EXPECT_THAT(r.out, HasSubstr(why));
}

TEST(AuditCli, AnIntactChainIsOk) {
  TempDir dir;
  const std::string url = MakeStore(dir, 5);
  CommandResult r = Verify(dir, url);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "audit chain OK: 5 records checked (sqlite)\n");
  EXPECT_EQ(r.err, "");
  // A plain path is SQLite too; --json - prints the result as JSON.
  r = RunTessera(dir, "audit verify --db '" + dir.File("tessera.db") + "' --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["records"], 5);
  EXPECT_EQ(j["database"], "sqlite");
}

TEST(AuditCli, DetectsAnEditedRecord) {
  TempDir dir;
  const std::string url = MakeStore(dir, 5, "UPDATE audit SET actor = 'mallory' WHERE seq = 3");
  ExpectBroken(Verify(dir, url), 3, "hash does not match its fields (2 records before it check out)");
}

TEST(AuditCli, DetectsARemovedRecord) {
  TempDir dir;
  const std::string url = MakeStore(dir, 5, "DELETE FROM audit WHERE seq = 3");
  ExpectBroken(Verify(dir, url), 3, "missing");
}

TEST(AuditCli, DetectsARemovedNewestRecord) {
  TempDir dir;
  const std::string url = MakeStore(dir, 5, "DELETE FROM audit WHERE seq = 5");
  ExpectBroken(Verify(dir, url), 5, "newest records removed");
}

TEST(AuditCli, DetectsAnInsertedRecord) {
  TempDir dir;
  // A record slipped in at seq 3 (the old 3..5 renumbered to 4..6, the head moved along), with
  // its hash computed correctly over a made-up prev_hash.
  const std::string forged = store::AuditHash(std::string(64, 'a'), 3, 1003, "mallory", "token.create", "tokens/m", "201");
  const std::string url = MakeStore(
      dir, 5,
      "UPDATE audit SET seq = 6 WHERE seq = 5; UPDATE audit SET seq = 5 WHERE seq = 4; "
      "UPDATE audit SET seq = 4 WHERE seq = 3; "
      "INSERT INTO audit (seq, time_ms, actor, action, target, result, prev_hash, hash) VALUES "
      "(3, 1003, 'mallory', 'token.create', 'tokens/m', '201', '" + std::string(64, 'a') + "', '" + forged + "'); "
      "UPDATE audit_head SET seq = 6 WHERE id = 1");
  ExpectBroken(Verify(dir, url), 3, "prev_hash does not match");
  // --json names it too.
  CommandResult r = Verify(dir, url, " --json -");
  EXPECT_EQ(r.exit_code, 1);
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["first_bad_seq"], 3);
  EXPECT_EQ(j["records"], 2);
}

TEST(AuditCli, AnUnopenableDatabaseIsBadInput) {
  TempDir dir;
  const std::string missing = dir.File("no-such.db");
  testing::ExpectOneLineBadInput(Verify(dir, missing), "tessera audit verify: cannot open --db '" + missing + "'");
  EXPECT_FALSE(std::filesystem::exists(missing)) << "verify created the database it was asked to check";
  {
    std::ofstream junk(dir.File("junk.db"));
    junk << "this is not a database, just some text that is long enough to be read as a header......\n";
  }
  testing::ExpectOneLineBadInput(Verify(dir, dir.File("junk.db")), "tessera audit verify: cannot open --db");
  testing::ExpectOneLineBadInput(RunTessera(dir, "audit verify"), "--db");
}

TEST(AuditCli, HelpExplainsTheCheck) {
  TempDir dir;
  CommandResult r = RunTessera(dir, "audit verify --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("edited, inserted or removed"));
  EXPECT_THAT(r.out, HasSubstr("--db"));
  EXPECT_THAT(r.out, HasSubstr("first bad seq"));
  EXPECT_THAT(r.out, HasSubstr("Exit status: 0 intact, 1 broken"));
}

}  // namespace
}  // namespace tessera
