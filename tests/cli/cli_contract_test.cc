// What a user of the CLI notices across commands: `--json PATH` (with `-` for stdout) everywhere,
// `tessera version`, unknown commands, error lines that start `tessera <command>: ` without
// internal status names, flags rejected where they do not apply, one row per pod list, `--check`
// only on the paper's cluster, and aligned tables.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/testing/cli_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;
using testing::CommandResult;
using testing::ExpectOneLineBadInput;
using testing::RunTessera;
using testing::TempDir;

const std::string kFake = TESSERA_FAKE_NVML_PATH;

// The whole of stdout parses as one JSON document.
nlohmann::json StdoutJson(const CommandResult& r) {
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "stdout is not JSON:\n" << r.out << "\nstderr: " << r.err;
  return j;
}

nlohmann::json FileJson(const TempDir& dir, const std::string& name) {
  const std::string text = testing::ReadTextFile(dir.File(name));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << name << " is not JSON: " << text;
  return j;
}

std::string SmallPods(int shift) {
  std::string text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  for (int i = 0; i < 60; ++i) {
    text += "p" + std::to_string(i) + ",4000,8192,1," + std::to_string(100 + (i * 37 + shift) % 900) + "\n";
  }
  return text;
}

TEST(CliContractTest, JsonIsAPathAndDashIsStdoutInEveryCommand) {
  TempDir dir;
  CommandResult r = RunTessera(dir, "simulate --policies bestfit --seeds 42 --html '' -q --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(StdoutJson(r)["runs"].size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir.File("-")));

  r = RunTessera(dir, "simulate --mig-model H100-80GB --gpus 8 --seeds 42 --policies fgd --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(StdoutJson(r)["mode"], "mig");

  r = RunTessera(dir, "mig layouts --model H100-80GB --json layouts.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(FileJson(dir, "layouts.json")["layouts"].size(), 10u);
  r = RunTessera(dir, "mig layouts --model A30-24GB --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(StdoutJson(r)["layouts"].size(), 5u);

  r = RunTessera(dir, "mig plan --model H100-80GB --gpus 1 --demand 3g.40gb=2 --json plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FileJson(dir, "plan.json")["steps"].size(), 2u);
  r = RunTessera(dir, "mig plan --model H100-80GB --gpus 1 --demand 3g.40gb=2 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(StdoutJson(r)["steps"].size(), 2u);

  r = RunTessera(dir, "mig validate --model H100-80GB --layout 3g.40gb@0,3g.40gb@4 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(StdoutJson(r)["valid"], true);

  r = RunTessera(dir, "mig simulate --model H100-80GB --gpus 4 --seeds 42-43 --json sim.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(FileJson(dir, "sim.json").contains("median_dynamic_unserved_pct"));

  r = RunTessera(dir, "mig show --nvml '" + kFake + "' --json show.json", "TESSERA_FAKE_NVML_CONFIG=A30-24GB:mig=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FileJson(dir, "show.json")["gpus"].size(), 1u);

  testing::WriteTextFile(dir.File("h100plan.json"), testing::ReadTextFile(dir.File("plan.json")));
  r = RunTessera(dir, "mig apply --model H100-80GB --plan h100plan.json --nvml '" + kFake + "' --yes --json -",
                 "TESSERA_FAKE_NVML_CONFIG=H100-80GB:mig=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json applied = StdoutJson(r);
  EXPECT_EQ(applied["applied"].size(), 2u);
  EXPECT_EQ(applied["gpus"][0]["gpu_instances"].size(), 2u);
}

// Issue 31, item 10: `-o json` and `--json PATH` meant different things per command (bill had
// only -o; anomalies, forecast and plan only --json, some printing JSON by default, some a table).
// Now in each: a table by default, -o json prints the JSON instead, --json PATH also writes it
// (the table still printed), and --json - is -o json.
TEST(CliContractTest, DashOJsonAndJsonPathMeanTheSameInEveryCommand) {
  TempDir dir;
  std::string series = "series,timestamp,value\n";
  for (int h = 0; h < 96; ++h)
    series += "a,2026-11-0" + std::to_string(1 + h / 24) + "T" + (h % 24 < 10 ? "0" : "") + std::to_string(h % 24) +
              ":00:00Z," + std::to_string(10 + h % 24) + "\n";
  testing::WriteTextFile(dir.File("series.csv"), series);
  const std::string src = TESSERA_SOURCE_DIR;
  const std::string ledger = src + "/data/examples/ledger-default-week.jsonl.gz";
  for (const std::string& command :
       {"bill --usage '" + ledger + "' --plan '" + src + "/data/examples/price-plan.yaml'",
        "anomalies --input '" + src + "/data/nab/data/artificialWithAnomaly/art_daily_jumpsup.csv'",
        std::string("forecast --input series.csv --horizon 3"),
        "plan capacity --history '" + ledger + "' --horizon 7d"}) {
    SCOPED_TRACE(command);
    const CommandResult table = RunTessera(dir, command);
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_TRUE(nlohmann::json::parse(table.out, nullptr, false).is_discarded()) << "not a table:\n" << table.out;
    const CommandResult json = RunTessera(dir, command + " -o json");
    ASSERT_EQ(json.exit_code, 0) << json.err;
    const nlohmann::json j = StdoutJson(json);
    const CommandResult dash = RunTessera(dir, command + " --json -");
    ASSERT_EQ(dash.exit_code, 0) << dash.err;
    EXPECT_EQ(dash.out, json.out);
    std::filesystem::remove(dir.File("out.json"));
    const CommandResult both = RunTessera(dir, command + " --json out.json");
    ASSERT_EQ(both.exit_code, 0) << both.err;
    EXPECT_EQ(both.out, table.out);
    EXPECT_EQ(FileJson(dir, "out.json"), j);
    EXPECT_THAT(RunTessera(dir, command + " --help").out, HasSubstr("-o,--output"));
  }
}

TEST(CliContractTest, ScenarioJsonToStdout) {
  TempDir dir;
  CommandResult r = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --days 0.05 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = StdoutJson(r);
  EXPECT_TRUE(j.contains("dedicated"));
  EXPECT_TRUE(j.contains("shared"));
}

TEST(CliContractTest, VersionPrintsTheVersionAndTheCommit) {
  TempDir dir;
  for (const char* args : {"version", "--version"}) {
    CommandResult r = RunTessera(dir, args);
    ASSERT_EQ(r.exit_code, 0) << args << ": " << r.err;
    EXPECT_THAT(r.out, MatchesRegex("tessera [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit ([0-9a-f]{4,40}(-dirty)?|unknown)\\)\n"))
        << args;
  }
}

// In the build tree: the source tree's data, the shim and the fake NVML next to the binary.
TEST(CliContractTest, VersionPathsNamesWhereTheDataAndTheShimAreFound) {
  TempDir dir;
  const std::string bin_dir = std::filesystem::path(TESSERA_BINARY).parent_path().string();
  CommandResult r = RunTessera(dir, "version --paths",
                               "env -u TESSERA_DATA_DIR -u TESSERA_SHIM_PATH -u TESSERA_FAKE_NVML_LIBRARY");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("tessera "));
  EXPECT_THAT(r.out, HasSubstr("\ndata:      " + std::string(TESSERA_SOURCE_DIR) + "/data (the source tree)\n"));
  EXPECT_THAT(r.out, HasSubstr("\nshim:      " + bin_dir + "/libtessera-shim.so (next to the executable)\n"));
  EXPECT_THAT(r.out, HasSubstr("\nfake-nvml: " + bin_dir +
                               "/tests/fake_nvml/libnvidia-ml.so.1 (for tessera agent --fake-gpus)\n"));
  EXPECT_EQ(r.err, "");
}

TEST(CliContractTest, VersionPathsFollowsTheEnvironmentAndFailsWithoutTheShim) {
  TempDir dir;
  CommandResult r = RunTessera(dir, "version --paths",
                               "TESSERA_DATA_DIR='" + dir.path() + "' TESSERA_SHIM_PATH='" + dir.File("none.so") + "'");
  EXPECT_FALSE(r.Crashed());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("\ndata:      " + dir.path() + " ($TESSERA_DATA_DIR)\n"));
  EXPECT_THAT(r.out, HasSubstr("\nshim:      not found\n"));
  EXPECT_THAT(r.err, HasSubstr(dir.File("none.so") + ": cannot load the shim"));
}

// `tessera serve --check`: the file and the flags, without opening a store or a port; the
// packaging's sample config passes (tests/install checks it once installed, too).
TEST(CliContractTest, ServeCheckValidatesTheConfigWithoutServing) {
  TempDir dir;
  const std::string sample = std::string(TESSERA_SOURCE_DIR) + "/packaging/config/serve.yaml";
  CommandResult ok = RunTessera(dir, "serve --config '" + sample + "' --check");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr(sample + ": valid (listen 127.0.0.1:8080, store sqlite:/var/lib/tessera/tessera.db)"));
  CommandResult no_store = RunTessera(dir, "serve --db sqlite:t.db --listen 127.0.0.1:0 --check");
  EXPECT_EQ(no_store.exit_code, 0) << no_store.err;
  EXPECT_FALSE(std::filesystem::exists(dir.File("t.db"))) << "--check opened the store";
  {
    std::ofstream bad(dir.File("serve.yaml"));
    bad << "listen: 127.0.0.1:9000\nbogus_key: 1\nscheduler:\n  preemption: maybe\n";
  }
  CommandResult bad = RunTessera(dir, "serve --config serve.yaml --check");
  EXPECT_FALSE(bad.Crashed());
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_THAT(bad.err, HasSubstr("serve.yaml:2: bogus_key: unknown key"));
  EXPECT_THAT(bad.err, HasSubstr("serve.yaml:4: scheduler.preemption: expected true or false"));
  EXPECT_EQ(bad.out, "");
  CommandResult flag = RunTessera(dir, "serve --listen nowhere --check");
  EXPECT_EQ(flag.exit_code, 2) << flag.out;
  EXPECT_THAT(flag.err, HasSubstr("--listen: expected HOST:PORT"));
}

// Issue 31, item 10: serve's config keys were the options' field names (node_timeout_s for
// --node-timeout, http_threads for --threads, rate_per_s, rate_burst for --rate, --burst). Each
// flag's name is now its key ('-' or '_'); the old keys stay as aliases; one option twice is exit 2.
TEST(CliContractTest, ServeConfigKeysAreTheFlagNames) {
  TempDir dir;
  testing::WriteTextFile(dir.File("flags.yaml"),
                         "listen: 127.0.0.1:9001\nnode_timeout: 45\nthreads: 4\nrate: 20\nburst: 50\n"
                         "cycle-interval-ms: 500\nmetrics-auth: true\n");
  CommandResult r = RunTessera(dir, "serve --config flags.yaml --check");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("valid (listen 127.0.0.1:9001"));
  testing::WriteTextFile(dir.File("old.yaml"), "node_timeout_s: 45\nhttp_threads: 4\nrate_per_s: 20\nrate_burst: 50\n");
  r = RunTessera(dir, "serve --config old.yaml --check");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  testing::WriteTextFile(dir.File("twice.yaml"), "rate: 20\nrate_per_s: 30\nthreads: none\n");
  r = RunTessera(dir, "serve --config twice.yaml --check");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.err, HasSubstr("twice.yaml:2: rate_per_s: set again (line 1 has rate, the same option)"));
  EXPECT_THAT(r.err, HasSubstr("twice.yaml:3: threads: expected a number in 1..64, got 'none'"));
}

// Issue 31, item 10: a flag a command cannot do without says so in --help: REQUIRED (CLI11) where
// it always is, "required without ..." where another flag stands in for it.
TEST(CliContractTest, RequiredFlagsAreMarkedInTheHelp) {
  TempDir dir;
  for (const auto& [command, needle] : std::vector<std::pair<std::string, std::string>>{
           {"ctl tokens create", "REQUIRED"},
           {"ctl workloads submit", "Leaf tenant (required without --file)"},
           {"anomalies", "(required without --score"},
           {"forecast", "(required without --backtest"},
           {"run", "(required without --server)"},
           {"bill", "REQUIRED"},
           {"plan capacity", "(required without --server)"}}) {
    const CommandResult r = RunTessera(dir, command + " --help");
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_THAT(r.out, HasSubstr(needle)) << command;
  }
}

// The names under "Subcommands:" of `tessera <path> --help` (CLI11 lists each at two spaces).
std::set<std::string> SubcommandsOf(const TempDir& dir, const std::string& path) {
  const CommandResult r = RunTessera(dir, path + " --help");
  EXPECT_EQ(r.exit_code, 0) << path;
  std::set<std::string> names;
  std::istringstream in(r.out);
  bool in_list = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "Subcommands:") in_list = true;
    else if (in_list && line.size() > 2 && line.starts_with("  ") && line[2] != ' ')
      names.insert(line.substr(2, line.find(' ', 2) - 2));
    else if (in_list && !line.empty() && line[0] != ' ') in_list = false;
  }
  return names;
}

// Issue 31: the README's CLI reference missed verbs. Every command and verb the binary has is a
// row of the table (`| `ctl nodes` | `list`, `remove` | ...`), and every row names one it has.
TEST(CliContractTest, TheReadmeCliReferenceListsEveryCommandAndVerb) {
  TempDir dir;
  std::set<std::string> binary;  // "ctl nodes remove", "serve", ...
  for (const std::string& command : SubcommandsOf(dir, "")) {
    const std::set<std::string> verbs = SubcommandsOf(dir, command);
    if (verbs.empty()) binary.insert(command);
    for (const std::string& verb : verbs) {
      const std::set<std::string> inner = command == "ctl" ? SubcommandsOf(dir, "ctl " + verb) : std::set<std::string>{};
      if (inner.empty()) binary.insert(command + " " + verb);
      for (const std::string& v : inner) binary.insert(command + " " + verb + " " + v);
    }
  }
  ASSERT_GT(binary.size(), 30u);
  const std::string readme = testing::ReadTextFile(std::string(TESSERA_SOURCE_DIR) + "/README.md");
  const size_t from = readme.find("\n## CLI reference\n");
  ASSERT_NE(from, std::string::npos);
  std::set<std::string> documented;
  std::istringstream in(readme.substr(from, readme.find("\n## ", from + 1) - from));
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("| `")) continue;
    const size_t cell2 = line.find('|', 1), cell3 = line.find('|', cell2 + 1);  // no '|' in these two cells
    auto ticked = [](const std::string& cell) {
      std::vector<std::string> words;
      for (size_t a = cell.find('`'); a != std::string::npos; a = cell.find('`', cell.find('`', a + 1) + 1))
        words.push_back(cell.substr(a + 1, cell.find('`', a + 1) - a - 1));
      return words;
    };
    const std::vector<std::string> commands = ticked(line.substr(1, cell2 - 1));
    const std::vector<std::string> verbs = ticked(line.substr(cell2 + 1, cell3 - cell2 - 1));
    for (const std::string& c : commands) {
      if (verbs.empty()) documented.insert(c);
      for (const std::string& v : verbs) documented.insert(c + " " + v);
    }
  }
  for (const std::string& c : binary) EXPECT_TRUE(documented.contains(c)) << "README's CLI reference lacks `" << c << "`";
  for (const std::string& c : documented) EXPECT_TRUE(binary.contains(c)) << "README's CLI reference names `" << c << "`, which tessera does not have";
}

TEST(CliContractTest, UnknownCommandNamesItAndShowsTheHelp) {
  TempDir dir;
  CommandResult r = RunTessera(dir, "frobnicate --x");
  EXPECT_FALSE(r.Crashed());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("tessera: unknown command 'frobnicate'\n"));
  EXPECT_THAT(r.err + r.out, HasSubstr("simulate"));
  EXPECT_THAT(r.err + r.out, HasSubstr("mig"));
}

TEST(CliContractTest, ErrorLinesNameTheCommandAndNoStatusCode) {
  TempDir dir;
  CommandResult r = RunTessera(dir, "mig layouts --model H999");
  ExpectOneLineBadInput(r, "unknown GPU model 'H999'");
  EXPECT_THAT(r.err, StartsWith("tessera mig layouts: "));
  r = RunTessera(dir, "simulate --bogus");
  ExpectOneLineBadInput(r, "--bogus");
  EXPECT_THAT(r.err, StartsWith("tessera simulate: "));
  r = RunTessera(dir, "mig plan --model H100-80GB --demand x");
  EXPECT_THAT(r.err, StartsWith("tessera mig plan: "));
  // A driver failure shows its message, never the status code's name.
  r = RunTessera(dir, "mig show --nvml '" + kFake + "' --json -",
                 "TESSERA_FAKE_NVML_CONFIG=A30-24GB:mig=1 TESSERA_FAKE_NVML_FAIL=nvmlDeviceGetName:2");
  EXPECT_THAT(r.out + r.err, Not(HasSubstr("INVALID_ARGUMENT")));
  EXPECT_THAT(r.out + r.err, Not(HasSubstr("UNKNOWN:")));
  for (const char* code : {"RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "NOT_FOUND", "UNAVAILABLE"}) {
    EXPECT_THAT(r.out + r.err, Not(HasSubstr(code)));
  }
}

TEST(CliContractTest, NegativeSeedsAreRejectedNamingTheFlag) {
  TempDir dir;
  ExpectOneLineBadInput(RunTessera(dir, "simulate --scenario dedicated-vs-shared --seed -1 -q"), "--seed");
  ExpectOneLineBadInput(RunTessera(dir, "simulate --seeds -3 --html ''"), "--seeds");
  ExpectOneLineBadInput(RunTessera(dir, "mig simulate --model H100-80GB --seeds -3"), "--seeds");
}

TEST(CliContractTest, FlagsOfAnotherModeAreRejected) {
  TempDir dir;
  const std::pair<const char*, const char*> cases[] = {
      {"simulate --scenario dedicated-vs-shared --policies fgd", "--policies"},
      {"simulate --scenario dedicated-vs-shared --seeds 42-43", "--seeds"},
      {"simulate --scenario dedicated-vs-shared --tune 1.2", "--tune"},
      {"simulate --scenario dedicated-vs-shared --all-lists", "--all-lists"},
      {"simulate --scenario dedicated-vs-shared --mig-model H100-80GB", "--mig-model"},
      {"simulate --quotas q.yaml", "--quotas"},
      {"simulate --node-stride 4", "--node-stride"},
      {"simulate --seed 7", "--seed"},
      {"simulate --gpus 4", "--gpus"},
      {"simulate --gpus-per-node 4", "--gpus-per-node"},
      {"simulate --mig-model H100-80GB --tune 1.2", "--tune"},
      {"simulate --mig-model H100-80GB --check", "--check"},
      {"simulate --mig-model H100-80GB --reference r.csv", "--reference"},
      {"simulate --mig-model H100-80GB --jobs 2", "--jobs"},
  };
  for (const auto& [args, flag] : cases) {
    CommandResult r = RunTessera(dir, args);
    ExpectOneLineBadInput(r, flag);
    EXPECT_THAT(r.err, StartsWith("tessera simulate: ")) << args;
  }
}

TEST(CliContractTest, SeveralPodListsGiveOneRowEachKeyedByPath) {
  TempDir dir;
  std::filesystem::create_directories(dir.File("a"));
  std::filesystem::create_directories(dir.File("b"));
  testing::WriteTextFile(dir.File("a/pods.csv"), SmallPods(0));
  testing::WriteTextFile(dir.File("b/pods.csv"), SmallPods(500));
  CommandResult r = RunTessera(dir, "simulate --pods a/pods.csv --pods b/pods.csv --policies bestfit --seeds 42 "
                                    "--html '' -q --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = StdoutJson(r);
  ASSERT_EQ(j["summary"].size(), 2u) << j["summary"].dump();
  EXPECT_EQ(j["summary"][0]["pods"], "a/pods.csv");
  EXPECT_EQ(j["summary"][1]["pods"], "b/pods.csv");
  EXPECT_EQ(j["summary"][0]["runs"], 1);
  ExpectOneLineBadInput(RunTessera(dir, "simulate --pods a/pods.csv --pods a/pods.csv --html '' -q"), "twice");
}

TEST(CliContractTest, CheckOnlyOnThePapersCluster) {
  TempDir dir;
  testing::WriteTextFile(dir.File("nodes.csv"), "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,8,V100M32\n");
  CommandResult r = RunTessera(dir, "simulate --nodes nodes.csv --policies fgd --seeds 42 --check --html '' -q");
  ExpectOneLineBadInput(r, "--check");
  EXPECT_THAT(r.err, HasSubstr("--nodes"));
}

TEST(CliContractTest, TableColumnsStayAlignedForLongListNames) {
  TempDir dir;
  const std::string name = "a_pod_list_with_a_rather_long_name_of_fifty_chars.csv";
  testing::WriteTextFile(dir.File(name), SmallPods(0));
  CommandResult r = RunTessera(dir, "simulate --pods " + name + " --policies bestfit --seeds 42 --html '' -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  const size_t policy_col = header.find("policy");
  ASSERT_NE(policy_col, std::string::npos) << header;
  EXPECT_EQ(row.find("bestfit"), policy_col) << header << "\n" << row;
  EXPECT_EQ(row.find(' '), name.size() - 4) << row;  // the name is not cut
  EXPECT_EQ(header.find("runs") + 4, row.find(" 1 ") + 2) << header << "\n" << row;
}

}  // namespace
}  // namespace tessera
