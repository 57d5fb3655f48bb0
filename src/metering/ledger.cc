#include "tessera/metering/ledger.h"

#include <algorithm>

#include "tessera/metering/civil_time.h"
#include "tessera/metering/money.h"

namespace tessera::metering {

namespace {

uint64_t Mix(uint64_t h, int64_t v) {
  h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

uint64_t Fingerprint(const SampleValues& v) {
  uint64_t h = 0;
  for (int64_t x : {v.start, v.end, v.gpu_milli_s_allocated, v.gpu_milli_s_used, v.memory_mib_s,
                    v.peak_memory_mib, v.kernel_launches, v.bytes_transferred}) {
    h = Mix(h, x);
  }
  return h;
}

// floor(q * t / d) for 0 <= t <= d, q >= 0.
inline int64_t Part(int64_t q, int64_t t, int64_t d) {
  return static_cast<int64_t>(static_cast<Int128>(q) * t / d);
}

Status Validate(const SampleValues& v) {
  if (v.end <= v.start) {
    return InvalidArgumentError("end " + std::to_string(v.end) + " is not after start " + std::to_string(v.start));
  }
  const std::pair<const char*, int64_t> fields[] = {
      {"gpu_milli_s_allocated", v.gpu_milli_s_allocated}, {"gpu_milli_s_used", v.gpu_milli_s_used},
      {"memory_mib_s", v.memory_mib_s}, {"peak_memory_mib", v.peak_memory_mib},
      {"kernel_launches", v.kernel_launches}};
  for (const auto& [name, x] : fields) {
    if (x < 0) return InvalidArgumentError(std::string(name) + ": negative value " + std::to_string(x));
  }
  if (v.bytes_transferred < -1) {
    return InvalidArgumentError("bytes_transferred: negative value " + std::to_string(v.bytes_transferred));
  }
  // Bounds that keep every hourly sum inside int64: a sample spans at most 31 days, a GPU has at
  // most 4 TiB, launches and bytes stay under 2^30 and 2^40 per second.
  const int64_t span = v.end - v.start;
  if (span > 31 * 86400) return InvalidArgumentError("span of " + std::to_string(span) + " s is longer than 31 days");
  if (v.memory_mib_s > (int64_t{1} << 22) * span || v.peak_memory_mib > (int64_t{1} << 22)) {
    return InvalidArgumentError("memory_mib_s/peak_memory_mib above 4 TiB for the span");
  }
  if (v.kernel_launches > (int64_t{1} << 30) * span || v.bytes_transferred > (int64_t{1} << 40) * span) {
    return InvalidArgumentError("kernel_launches/bytes_transferred above 2^30/2^40 per second for the span");
  }
  const int64_t one_gpu = 1000 * span;
  if (v.gpu_milli_s_allocated > one_gpu || v.gpu_milli_s_used > one_gpu) {
    return InvalidArgumentError("gpu_milli_s_allocated/used above one GPU for the span (max " +
                                std::to_string(one_gpu) + ")");
  }
  return Status::Ok();
}

}  // namespace

std::string Ledger::Joined(const SourceKey& k) {
  std::string joined;
  joined.reserve(k.tenant.size() + k.node.size() + k.gpu.size() + k.model.size() + k.partition.size() +
                 k.workload.size() + 6);
  for (const std::string* part : {&k.tenant, &k.node, &k.gpu, &k.model, &k.partition, &k.workload}) {
    joined += *part;
    joined.push_back('\x1f');
  }
  return joined;
}

uint32_t Ledger::Intern(const SourceKey& k) {
  auto [it, inserted] = ids_.try_emplace(Joined(k), static_cast<uint32_t>(keys_.size()));
  if (inserted) {
    keys_.push_back(k);
    state_.emplace_back();
  }
  return it->second;
}

HourlyRecord& Ledger::Hour(Source& s, uint32_t id, int64_t hour) {
  if (s.last != nullptr && s.last->hour == hour) return *s.last;
  auto [it, inserted] = s.hours.try_emplace(hour);
  if (inserted) {
    it->second.source = id;
    it->second.hour = hour;
  }
  s.last = &it->second;
  return it->second;
}

void Ledger::Add(Source& s, uint32_t id, const SampleValues& v) {
  const int64_t first = HourOf(v.start), last = HourOf(v.end - 1);
  const bool known = v.bytes_transferred >= 0;
  if (first == last) {  // the common case: the whole sample in one hour
    HourlyRecord& r = Hour(s, id, first * kSecondsPerHour);
    r.seconds += v.end - v.start;
    r.gpu_milli_s_allocated += v.gpu_milli_s_allocated;
    r.gpu_milli_s_used += v.gpu_milli_s_used;
    r.memory_mib_s += v.memory_mib_s;
    r.peak_memory_mib = std::max(r.peak_memory_mib, v.peak_memory_mib);
    r.kernel_launches += v.kernel_launches;
    if (known) r.bytes_transferred += v.bytes_transferred;
    ++r.samples;
    if (!known) ++r.samples_without_bytes;
    return;
  }
  const int64_t d = v.end - v.start;
  int64_t prev_t = 0;
  for (int64_t h = first; h <= last; ++h) {
    const int64_t t = std::min(v.end, (h + 1) * kSecondsPerHour) - v.start;
    HourlyRecord& r = Hour(s, id, h * kSecondsPerHour);
    auto part = [&](int64_t q) { return Part(q, t, d) - Part(q, prev_t, d); };
    r.seconds += t - prev_t;
    r.gpu_milli_s_allocated += part(v.gpu_milli_s_allocated);
    r.gpu_milli_s_used += part(v.gpu_milli_s_used);
    r.memory_mib_s += part(v.memory_mib_s);
    r.peak_memory_mib = std::max(r.peak_memory_mib, v.peak_memory_mib);
    r.kernel_launches += part(v.kernel_launches);
    if (known) r.bytes_transferred += part(v.bytes_transferred);
    ++r.samples;
    if (!known) ++r.samples_without_bytes;
    prev_t = t;
  }
}

StatusOr<Ledger::Place> Ledger::Locate(const Source& s, const SampleValues& v, uint64_t fp) {
  const auto& spans = s.spans;
  if (spans.empty() || (v.start >= spans.back().end && v.seq > spans.back().seq)) {
    return Place{IngestResult::kCounted, spans.size()};  // in order: the fast path
  }
  // A resend, a late sample or an error: find its place by start.
  auto it = std::lower_bound(spans.begin(), spans.end(), v.start,
                             [](const Span& a, int64_t start) { return a.start < start; });
  for (auto probe : {it, it == spans.begin() ? spans.end() : it - 1}) {
    if (probe != spans.end() && probe->seq == v.seq) {
      if (probe->start == v.start && probe->end == v.end && probe->fingerprint == fp) {
        return Place{IngestResult::kDuplicate, 0};
      }
      return AlreadyExistsError("seq " + std::to_string(v.seq) +
                                " was already counted with a different span or values (a conflicting resend)");
    }
  }
  const Span* prev = it == spans.begin() ? nullptr : &*(it - 1);
  const Span* next = it == spans.end() ? nullptr : &*it;
  if (prev != nullptr && prev->end > v.start) {
    return FailedPreconditionError("overlaps seq " + std::to_string(prev->seq) + " of the same source");
  }
  if (next != nullptr && next->start < v.end) {
    return FailedPreconditionError("overlaps seq " + std::to_string(next->seq) + " of the same source");
  }
  if ((prev != nullptr && prev->seq >= v.seq) || (next != nullptr && next->seq <= v.seq)) {
    return FailedPreconditionError("seq " + std::to_string(v.seq) +
                                   " is out of order with the source's samples around it in time (seq " +
                                   std::to_string(prev != nullptr ? prev->seq : next->seq) + ")");
  }
  return Place{IngestResult::kCounted, static_cast<size_t>(it - spans.begin())};
}

StatusOr<IngestResult> Ledger::Ingest(uint32_t id, const SampleValues& v) {
  if (id >= state_.size()) return InvalidArgumentError("unknown source id " + std::to_string(id));
  TESSERA_RETURN_IF_ERROR(Validate(v));
  Source& s = state_[id];
  const uint64_t fp = Fingerprint(v);
  TESSERA_ASSIGN_OR_RETURN(Place place, Locate(s, v, fp));
  if (place.result == IngestResult::kDuplicate) {
    ++duplicates_;
    return IngestResult::kDuplicate;
  }
  s.spans.insert(s.spans.begin() + static_cast<std::ptrdiff_t>(place.at), {v.start, v.end, v.seq, fp});
  Add(s, id, v);
  ++counted_;
  return IngestResult::kCounted;
}

StatusOr<IngestResult> Ledger::Check(const SourceKey& key, const SampleValues& v) const {
  TESSERA_RETURN_IF_ERROR(Validate(v));
  auto it = ids_.find(Joined(key));
  if (it == ids_.end()) return IngestResult::kCounted;  // a new source takes any valid sample
  TESSERA_ASSIGN_OR_RETURN(Place place, Locate(state_[it->second], v, Fingerprint(v)));
  return place.result;
}

std::vector<HourlyRecord> Ledger::Records() const {
  std::vector<HourlyRecord> out;
  size_t n = 0;
  for (const Source& s : state_) n += s.hours.size();
  out.reserve(n);
  for (const Source& s : state_) {
    for (const auto& [hour, r] : s.hours) out.push_back(r);
  }
  return out;
}

}  // namespace tessera::metering
