#include "src/daemon/read_query.h"

#include <charconv>

#include "src/daemon/usage_codec.h"

namespace tessera::daemon {
namespace {

// A decimal integer of digits only (no sign, no space): nullopt otherwise or on overflow.
std::optional<int64_t> Digits(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

Status Named(Status st, std::string_view field, std::string* bad_field) {
  if (bad_field) *bad_field = std::string(field);
  return st;
}

}  // namespace

StatusOr<int64_t> ParseAfter(std::string_view text, std::string_view field) {
  std::optional<int64_t> v = Digits(text);
  if (!v) return InvalidArgumentError(std::string(field) + ": '" + std::string(text) + "' is not an integer >= 0");
  return *v;
}

StatusOr<ReadQuery> ParseReadQuery(const std::map<std::string, std::string>& query, std::string* bad_field) {
  ReadQuery q;
  auto get = [&](const char* key) -> const std::string* {
    auto it = query.find(key);
    return it == query.end() ? nullptr : &it->second;
  };
  if (const std::string* t = get("tenant")) q.tenant = *t;
  for (auto [key, into] : {std::pair{"from", &q.from_s}, {"to", &q.to_s}}) {
    const std::string* text = get(key);
    if (!text) continue;
    StatusOr<int64_t> t = ParseUsageTime(*text, key);
    if (!t.ok()) return Named(t.status(), key, bad_field);
    *into = *t;
  }
  if (q.from_s && q.to_s && *q.from_s >= *q.to_s)
    return Named(InvalidArgumentError("from: must be before to"), "from", bad_field);
  if (const std::string* text = get("after")) {
    StatusOr<int64_t> a = ParseAfter(*text, "after");
    if (!a.ok()) return Named(a.status(), "after", bad_field);
    q.after = *a;
  }
  if (const std::string* text = get("limit")) {
    std::optional<int64_t> l = Digits(*text);
    if (!l || *l < 1 || *l > kMaxReadLimit)
      return Named(InvalidArgumentError("limit: '" + *text + "' is not an integer 1.." + std::to_string(kMaxReadLimit)),
                   "limit", bad_field);
    q.limit = static_cast<int>(*l);
  }
  return q;
}

std::optional<int64_t> ParseId(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

}  // namespace tessera::daemon
