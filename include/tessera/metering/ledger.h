// The usage ledger: usage samples from the node side, aggregated into hourly records, each
// counted exactly once.
//
// A sample is what one source measured over a time span [start, end) (whole seconds): a source is
// one workload of one tenant on one partition of one GPU (SourceKey). Quantities (all integers):
//   gpu_milli_s_allocated  milli-GPU x seconds held (a 0.5-GPU share for 10 s: 5000)
//   gpu_milli_s_used       milli-GPU x seconds busy (SM activity x allocation where measured)
//   memory_mib_s           GPU memory MiB x seconds held
//   peak_memory_mib        the peak inside the span (not split: each hour gets the maximum)
//   kernel_launches        launches inside the span
//   bytes_transferred      host<->device bytes, or -1 where the source does not know
//
// Rules (Ingest):
//   * Idempotent: a sample whose source and seq were seen is a resend; if its span and values
//     are identical it is counted once (kDuplicate), otherwise it is an error (a conflicting resend).
//   * Late samples land in their hour (the hour of their span, whatever the arrival order).
//   * Within a source, spans may not overlap and seq increases with time: a sample that overlaps
//     another of its source, or whose seq is out of order with its neighbours in time, is an
//     error naming the other sample's seq (never a double count).
//   * Split rule at hour boundaries: a sample of D seconds crossing hours h0 < h1 < ... gets in
//     hour h_k the quantity floor(Q * T_k / D) - floor(Q * T_(k-1) / D), T_k = seconds of the span
//     up to the end of h_k (T_-1 = 0). The parts sum to Q exactly (no drift, integer arithmetic);
//     the covered seconds are exact.
//     Example: 00:50:00 -> 01:20:00 (D = 1800 s), Q = 1001: hour 0 gets floor(1001 * 600 / 1800)
//     = 333, hour 1 gets 1001 - 333 = 668.
//
// Thread-safety: one Ledger is used from one thread at a time. Ownership: the ledger owns its
// sources and records. Pure: no I/O, no clock (ledger_file.h parses the file format).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::metering {

struct SourceKey {
  std::string tenant;
  std::string node;
  std::string gpu;        // the GPU on its node: index or UUID, as the node side names it
  std::string model;      // GPU model, a catalog name ("A100-80GB")
  std::string partition;  // "whole", "share" (MPS or time-sliced fraction) or a MIG profile ("3g.40gb")
  std::string workload;   // the workload (pod, job) metered
  friend bool operator==(const SourceKey&, const SourceKey&) = default;
};

struct SampleValues {
  int64_t seq = 0;
  int64_t start = 0;  // seconds since the epoch, inclusive
  int64_t end = 0;    // exclusive; end > start
  int64_t gpu_milli_s_allocated = 0;
  int64_t gpu_milli_s_used = 0;
  int64_t memory_mib_s = 0;
  int64_t peak_memory_mib = 0;
  int64_t kernel_launches = 0;
  int64_t bytes_transferred = -1;  // -1: unknown
};

// One source's usage in one hour.
struct HourlyRecord {
  uint32_t source = 0;
  int64_t hour = 0;     // start of the hour, seconds since the epoch
  int64_t seconds = 0;  // seconds of the hour covered by samples
  int64_t gpu_milli_s_allocated = 0;
  int64_t gpu_milli_s_used = 0;
  int64_t memory_mib_s = 0;
  int64_t peak_memory_mib = 0;
  int64_t kernel_launches = 0;
  int64_t bytes_transferred = 0;       // of the samples that knew it
  int64_t samples = 0;                 // samples (or parts of samples) counted in the hour
  int64_t samples_without_bytes = 0;   // of those, how many did not know bytes_transferred
};

enum class IngestResult { kCounted, kDuplicate };

class Ledger {
 public:
  // The same key always gets the same id (0, 1, ...).
  uint32_t Intern(const SourceKey& key);
  const SourceKey& source(uint32_t id) const { return keys_[id]; }
  const std::vector<SourceKey>& sources() const { return keys_; }

  // INVALID_ARGUMENT for a bad sample (end <= start, negative quantity, allocation above one GPU
  // for the span), ALREADY_EXISTS for a conflicting resend, FAILED_PRECONDITION for an overlap or
  // a seq out of order; the ledger is unchanged by a failed call.
  StatusOr<IngestResult> Ingest(uint32_t source, const SampleValues& sample);
  StatusOr<IngestResult> Ingest(const SourceKey& key, const SampleValues& sample) {
    return Ingest(Intern(key), sample);
  }

  // What Ingest would answer for the sample, without changing the ledger (nor interning the key):
  // the daemon asks before it stores a sample, so that the table and the ledger hold the same.
  StatusOr<IngestResult> Check(const SourceKey& key, const SampleValues& sample) const;

  // Every hourly record, by source id then hour.
  std::vector<HourlyRecord> Records() const;
  int64_t counted() const { return counted_; }
  int64_t duplicates() const { return duplicates_; }

 private:
  struct Span {
    int64_t start, end, seq;
    uint64_t fingerprint;
  };
  struct Source {
    std::vector<Span> spans;  // by start; non-overlapping, seq increasing
    std::map<int64_t, HourlyRecord> hours;
    HourlyRecord* last = nullptr;  // the hour of the last sample (fast path)
  };
  // Where the sample goes among the source's spans: kCounted with the index to insert at,
  // kDuplicate, or the error (Ingest's rules).
  struct Place {
    IngestResult result;
    size_t at;
  };
  static StatusOr<Place> Locate(const Source& s, const SampleValues& v, uint64_t fingerprint);
  static std::string Joined(const SourceKey& key);
  HourlyRecord& Hour(Source& s, uint32_t id, int64_t hour);
  void Add(Source& s, uint32_t id, const SampleValues& v);

  std::vector<SourceKey> keys_;
  std::vector<Source> state_;
  std::unordered_map<std::string, uint32_t> ids_;
  int64_t counted_ = 0, duplicates_ = 0;
};

}  // namespace tessera::metering
