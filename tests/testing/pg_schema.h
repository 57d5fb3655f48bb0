// A throw-away PostgreSQL schema per test, on the server tests/store/with_postgres.sh starts (it
// exports TESSERA_TEST_PG_URL, postgresql:///postgres?host=DIR&port=PORT&user=postgres, and
// TESSERA_TEST_REQUIRE_PG=1). A schema is much cheaper than a database: the store's connection
// gets it as its search_path, so every table the store creates and reads lives there.
//
//   PgTestSchema pg;
//   if (PgTestSchema::Available()) { ASSERT_TRUE(pg.Create()); db = pg.url(); }  // dropped with pg
//
// Thread-safety: one PgTestSchema per test; Create from the test's thread.
#pragma once

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace tessera::testing {

inline std::string EnvValue(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Runs one SQL command on the server of `base_url`.
inline ::testing::AssertionResult PgAdmin(const std::string& base_url, const std::string& sql) {
  PGconn* conn = PQconnectdb(base_url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    return ::testing::AssertionFailure() << "cannot connect to " << base_url << ": " << msg;
  }
  PGresult* res = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
  std::string msg = PQresultErrorMessage(res);
  PQclear(res);
  PQfinish(conn);
  if (!ok) return ::testing::AssertionFailure() << sql << ": " << msg;
  return ::testing::AssertionSuccess();
}

class PgTestSchema {
 public:
  PgTestSchema() = default;
  PgTestSchema(const PgTestSchema&) = delete;
  PgTestSchema& operator=(const PgTestSchema&) = delete;
  ~PgTestSchema() {
    if (!schema_.empty()) {
      EXPECT_TRUE(PgAdmin(base_, "DROP SCHEMA " + schema_ + " CASCADE"));
    }
  }
  // Whether a server was given (TESSERA_TEST_PG_URL).
  static bool Available() { return !EnvValue("TESSERA_TEST_PG_URL").empty(); }
  // Whether the run must have one (with_postgres.sh sets it): without a server, fail, never skip.
  static bool Required() { return !EnvValue("TESSERA_TEST_REQUIRE_PG").empty(); }

  ::testing::AssertionResult Create() {
    base_ = EnvValue("TESSERA_TEST_PG_URL");
    if (base_.empty()) return ::testing::AssertionFailure() << "TESSERA_TEST_PG_URL is not set";
    if (base_.find('?') == std::string::npos)
      return ::testing::AssertionFailure() << "TESSERA_TEST_PG_URL must have parameters (?host=...)";
    static int counter = 0;
    const std::string name = "tessera_test_" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
    ::testing::AssertionResult made = PgAdmin(base_, "CREATE SCHEMA " + name);
    if (!made) return made;
    schema_ = name;
    return ::testing::AssertionSuccess();
  }
  // The store URL whose tables live in this schema.
  std::string url() const { return base_ + "&options=-c%20search_path%3D" + schema_; }
  const std::string& base_url() const { return base_; }

 private:
  std::string base_;
  std::string schema_;
};

}  // namespace tessera::testing
