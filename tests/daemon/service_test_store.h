// The daemon service tests' store: a fresh SQLite database in a folder of the test's own.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "tessera/store/store.h"

namespace tessera::daemon {

// Sets `dir` to a fresh <tmp>/<prefix>-<test name> (emptied first) and opens a SQLite store in it
// into `db`; a test failure naming the error when it cannot (then `db` stays null).
inline void OpenServiceTestStore(const std::string& prefix, std::filesystem::path& dir,
                                 std::unique_ptr<store::Store>& db) {
  dir = std::filesystem::temp_directory_path() /
        (prefix + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto opened = store::Open("sqlite:" + (dir / "store.db").string());
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  db = std::move(*opened);
}

}  // namespace tessera::daemon
