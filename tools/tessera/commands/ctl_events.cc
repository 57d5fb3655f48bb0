// `tessera ctl events`: GET /v1/events followed on the terminal, one line per event (a workload's,
// or a node's, tenant's or token's change: its WORKLOAD column names the object, "node:gpu-1").
#include <cstdio>
#include <string>


#include "tessera/api/event_wire.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

namespace {

struct EventFlags {
  std::string tenant;
  int64_t workload = 0;
  int64_t after = -1;
  int64_t count = 0;
};

int Follow(const CtlConnection& c, const EventFlags& f) {
  const std::string command = "ctl events";
  // Pings come every 15 s: a minute of silence means the server is gone.
  StatusOr<std::unique_ptr<daemon::ApiClient>> client = CtlClient(c, 60'000);
  if (!client.ok()) return Fail(command, client.status(), kExitBadInput);
  std::string target = "/v1/events?";
  if (!f.tenant.empty()) target += "tenant=" + QueryEscape(f.tenant) + "&";
  if (f.workload > 0) target += "workload=" + std::to_string(f.workload) + "&";
  if (f.after >= 0) target += "after=" + std::to_string(f.after);
  daemon::EventStreamParser parser;
  int64_t seen = 0;
  bool headed = false;
  StatusOr<daemon::ApiResponse> r = (*client)->Stream(target, {}, [&](std::string_view chunk) {
    if (!headed && c.output == "table")  // the stream is open (2xx): the table starts
      std::printf("%-8s %-20s %-16s %-9s %-10s %s\n", "ID", "TIME", "TENANT", "WORKLOAD", "KIND", "DETAIL");
    headed = true;
    for (const std::string& data : parser.Feed(chunk)) {
      StatusOr<api::Event> e = api::DecodeEvent(data, nullptr);
      if (c.output == "json" || !e.ok()) {
        std::printf("%s\n", data.c_str());
      } else {
        std::string object = e->subject == "workload" ? std::to_string(e->workload)
                             : e->subject == "tenant" ? std::string("tenant")
                                                      : e->subject + ":" + e->name;
        const std::string tenant = e->subject == "tenant" ? e->name : e->subject == "node" ? "" : e->tenant;
        std::printf("%-8lld %-20s %-16s %-9s %-10s %s\n", static_cast<long long>(e->id), Rfc3339(e->time_ms).c_str(),
                    tenant.c_str(), object.c_str(), e->kind.c_str(), e->detail.c_str());
      }
      if (f.count > 0 && ++seen >= f.count) return false;
    }
    std::fflush(stdout);
    return true;
  });
  if (!r.ok()) return Fail(command, r.status(), kExitFailure);
  if (r->status < 200 || r->status > 299)
    return Fail(command, "HTTP " + std::to_string(r->status) + ": " + daemon::ApiError(*r), kExitFailure);
  return kExitOk;
}

}  // namespace

void RegisterCtlEvents(CLI::App* ctl, std::shared_ptr<const CtlConnection> connection, int* exit_code) {
  auto f = std::make_shared<EventFlags>();
  CLI::App* events = ctl->add_subcommand(
      "events",
      "Follow events as they happen (workloads placed, preempted, requeued, finished, ...; nodes, tenants\n"
      "and tokens changed), one line each: ID, TIME (UTC), TENANT, WORKLOAD (or node:NAME, token:ID,\n"
      "tenant), KIND, DETAIL; -o json prints each event's JSON. Runs until interrupted, the server ends\n"
      "the stream, or --count events arrived. A tenant token sees its subtree (no node events).");
  events->fallthrough();
  events->add_option("--tenant", f->tenant, "Only this tenant's subtree");
  events->add_option("--workload", f->workload, "Only this workload's events");
  events->add_option("--after", f->after,
                     "First replay every event with an id above this one (0: the whole history); default: from now on");
  events->add_option("--count", f->count, "Stop after this many events (default: never)");
  events->callback([connection, f, exit_code] { *exit_code = CtlGuard([&] { return Follow(*connection, *f); }); });
}

}  // namespace tessera::cli
