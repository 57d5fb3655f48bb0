// `tessera audit verify --db URL`: checks the control plane's hash-chained audit log. Flags and
// printing only: the walk is tessera::store's VerifyAuditChain (include/tessera/store/store.h).
//   tessera audit verify --db /var/lib/tessera/tessera.db [--json PATH|-]
// Exit 0: the chain is intact; 1: it is broken (the first bad seq and why) or could not be read;
// 2: bad input (the database cannot be opened, or does not exist).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tessera/store/store.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

constexpr const char* kCommand = "audit verify";

struct AuditFlags {
  std::string db;
  std::string json_out;
};

std::string Text(const store::AuditVerification& v, std::string_view kind) {
  if (v.ok) {
    return "audit chain OK: " + std::to_string(v.records) + " records checked (" + std::string(kind) + ")\n";
  }
  return "audit chain BROKEN at seq " + std::to_string(v.first_bad_seq) + ": " + v.problem + " (" +
         std::to_string(v.records) + " records before it check out)\n";
}

int RunVerify(const AuditFlags& f) {
  store::Options options;
  options.create_if_missing = false;  // a mistyped path must not verify as an empty, intact log
  StatusOr<std::unique_ptr<store::Store>> db = store::Open(f.db, options);
  if (!db.ok()) return Fail(kCommand, "cannot open --db '" + f.db + "': " + db.status().message(), kExitBadInput);
  StatusOr<store::AuditVerification> v = (*db)->VerifyAuditChain();
  if (!v.ok()) return Fail(kCommand, "reading the audit log of '" + f.db + "': " + v.status().message(), kExitFailure);
  std::string out;
  if (f.json_out.empty()) {
    out = Text(*v, (*db)->Kind());
  } else {
    nlohmann::json j{{"ok", v->ok}, {"records", v->records}, {"database", (*db)->Kind()}};
    if (!v->ok) {
      j["first_bad_seq"] = v->first_bad_seq;
      j["problem"] = v->problem;
    }
    out = j.dump(2) + "\n";
  }
  if (Status s = WriteOutput(f.json_out.empty() ? "-" : f.json_out, out); !s.ok()) {
    return Fail(kCommand, s, kExitFailure);
  }
  if (!f.json_out.empty() && f.json_out != "-") std::fputs(Text(*v, (*db)->Kind()).c_str(), stdout);
  return v->ok ? kExitOk : kExitFailure;
}

}  // namespace

void RegisterAudit(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<AuditFlags>();
  CLI::App* audit = app.add_subcommand("audit", "The control plane's hash-chained audit log");
  audit->require_subcommand(1);
  CLI::App* verify = audit->add_subcommand("verify", "Check that no audit record was edited, inserted or removed");
  verify->footer(
      "\nWalks the audit log of a `tessera serve` store from seq 1: every record must carry the\n"
      "SHA-256 of its fields and of the record before it, seqs must have no gap, and the last\n"
      "record must be the store's head (so removing the newest records shows too). Prints the\n"
      "number of records checked, or the first bad seq and what is wrong with it.\n"
      "Exit status: 0 intact, 1 broken (or unreadable), 2 the database cannot be opened.");
  verify->add_option("--db", flags->db, "The store: a SQLite file (PATH or sqlite:PATH) or a postgresql:// URL")
      ->required();
  verify->add_option("--json", flags->json_out,
                     "Write {ok,records,database,first_bad_seq,problem} as JSON to this file ('-': to stdout)");
  verify->callback([flags, exit_code] { *exit_code = RunVerify(*flags); });
}

}  // namespace tessera::cli
