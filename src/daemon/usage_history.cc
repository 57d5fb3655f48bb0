#include "tessera/daemon/usage_history.h"

#include <algorithm>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/metering/civil_time.h"

namespace tessera::daemon {

namespace {

using json = nlohmann::json;

constexpr int64_t kHour = metering::kSecondsPerHour;
constexpr int64_t kWindow = 24 * kHour;

Status AnswerStatus(const std::string& target, const ApiResponse& r) {
  const std::string message = "GET " + target + ": HTTP " + std::to_string(r.status) + ": " + ApiError(r);
  switch (r.status) {
    case 400: return InvalidArgumentError(message);
    case 401: return Status(StatusCode::kUnauthenticated, message);
    case 403: return Status(StatusCode::kPermissionDenied, message);
    case 404: return NotFoundError(message);
    default: return UnavailableError(message);
  }
}

// Adds the answer's hours to `by_model` (model -> hour -> milli-GPU seconds allocated).
Status AddHours(const std::string& target, const std::string& body,
                std::map<std::string, std::map<int64_t, int64_t>>& by_model) {
  const json answer = json::parse(body, nullptr, false);
  auto bad = [&](const std::string& field, const char* what) {
    return DataLossError("GET " + target + ": the answer's " + field + " " + what);
  };
  if (!answer.is_object() || !answer.contains("hours") || !answer["hours"].is_array())
    return bad("hours", "is not an array (is this a tessera control plane?)");
  const json& hours = answer["hours"];
  for (size_t i = 0; i < hours.size(); ++i) {
    const std::string at = "hours[" + std::to_string(i) + "]";
    const json& h = hours[i];
    if (!h.is_object()) return bad(at, "is not an object");
    if (!h.contains("model") || !h["model"].is_string() || h["model"].get<std::string>().empty())
      return bad(at + ".model", "is not a GPU model name");
    if (!h.contains("hour_s") || !h["hour_s"].is_number_integer() || h["hour_s"].get<int64_t>() % kHour != 0)
      return bad(at + ".hour_s", "is not the start of an hour in unix seconds");
    if (!h.contains("gpu_milli_s_allocated") || !h["gpu_milli_s_allocated"].is_number_integer() ||
        h["gpu_milli_s_allocated"].get<int64_t>() < 0)
      return bad(at + ".gpu_milli_s_allocated", "is not a whole number >= 0");
    by_model[h["model"].get<std::string>()][h["hour_s"].get<int64_t>()] += h["gpu_milli_s_allocated"].get<int64_t>();
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<metering::ModelDemand>> FetchDemandByModel(ApiClient& client, int64_t from_s, int64_t to_s) {
  if (from_s % kHour != 0 || to_s % kHour != 0 || from_s >= to_s)
    return InvalidArgumentError("usage history: from " + std::to_string(from_s) + " and to " + std::to_string(to_s) +
                                " must be whole hours, from before to");
  std::map<std::string, std::map<int64_t, int64_t>> by_model;
  for (int64_t start = from_s; start < to_s; start += kWindow) {
    const int64_t end = std::min(to_s, start + kWindow);
    const std::string target = "/v1/usage?from=" + std::to_string(start) + "&to=" + std::to_string(end);
    TESSERA_ASSIGN_OR_RETURN(const ApiResponse r, client.Call("GET", target));
    if (r.status < 200 || r.status > 299) return AnswerStatus(target, r);
    TESSERA_RETURN_IF_ERROR(AddHours(target, r.body, by_model));
  }
  std::vector<metering::ModelDemand> out;
  for (const auto& [model, hours] : by_model) {
    // The server sends the hours overlapping [start, end): whole hours, so all inside [from, to).
    const int64_t first = std::max(hours.begin()->first, from_s);
    metering::ModelDemand d{model, first, std::vector<double>(static_cast<size_t>((to_s - first) / kHour), 0.0)};
    for (const auto& [hour, milli_s] : hours)
      if (hour >= first && hour < to_s) d.gpus[static_cast<size_t>((hour - first) / kHour)] += milli_s / 3'600'000.0;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace tessera::daemon
