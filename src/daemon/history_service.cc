#include "src/daemon/history_service.h"

#include <cstdlib>
#include <utility>

namespace tessera::daemon {

HistoryService::HistoryService(const ClusterHistory& history, ParentOf parents, const Clock& clock)
    : history_(history), parents_(std::move(parents)), clock_(clock) {}

StatusOr<HistoryAnswer> HistoryService::Read(const ReadCaller& caller, const HistoryQuery& query,
                                             std::string* bad_field) {
  const std::string& tenant = query.tenant;
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kReadUsage, tenant, "tenant '" + tenant + "'"));
  if (!tenant.empty() && !parents_(tenant)) return NotFoundError("tenant '" + tenant + "' not found");
  HistoryAnswer out;
  out.from_s = query.from_s.value_or(UnixMillis(clock_) / 1000 - 3600);  // the last hour by default
  int64_t step = history_.step_s();
  if (query.step) {
    const std::string& text = *query.step;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    // Digits only: strtoll alone would take " 5" and "+5".
    const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || end == text.c_str() || *end != '\0' || v < 1 || v > 86400) {
      if (bad_field) *bad_field = "step";
      return InvalidArgumentError("step: '" + text + "' is not a number of seconds 1..86400");
    }
    step = v;
  }
  const bool whole = SeesAllTenants(caller.principal);
  const std::string root = !tenant.empty() ? tenant : whole ? "" : caller.principal.tenant;
  out.window = history_.Read(out.from_s, step, [&](const std::string& name) {
    return root.empty() || InSubtree(name, root, parents_);
  });
  out.recorded_every_s = history_.step_s();
  out.kept_s = history_.keep_s();
  out.idle_gpus = whole && tenant.empty();
  return out;
}

}  // namespace tessera::daemon
