// Helpers for the CLI contract tests (tests/cli): run the built `tessera` binary in a scratch
// folder, and check the one-line bad-input contract (exit 2, one line naming the problem).
//
//   TempDir dir;
//   CommandResult r = RunTessera(dir, "mig plan --model H999 --demand 1g.10gb=1");
//   ExpectOneLineBadInput(r, "unknown GPU model 'H999'");
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/testing/sim_test_util.h"

namespace tessera::testing {

// Runs TESSERA_BINARY with `args` in `dir`; `env` ("A=1 B='x'") is put in front.
inline CommandResult RunTessera(const TempDir& dir, const std::string& args, const std::string& env = "") {
  return RunCommand("cd '" + dir.path() + "' && " + env + (env.empty() ? "" : " ") + "'" +
                        std::string(TESSERA_BINARY) + "' " + args,
                    dir);
}

// Exit code 2, no crash, and exactly one line on stderr that contains `needle`.
inline void ExpectOneLineBadInput(const CommandResult& r, const std::string& needle) {
  EXPECT_FALSE(r.Crashed());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr(needle));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace tessera::testing
