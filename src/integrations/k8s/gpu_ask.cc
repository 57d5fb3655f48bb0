#include "tessera/integrations/k8s/gpu_ask.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace tessera::k8s {
namespace {

using Annotations = std::map<std::string, std::string, std::less<>>;

const std::string* Find(const Annotations& a, std::string_view key) {
  auto it = a.find(key);
  return it == a.end() ? nullptr : &it->second;
}

StatusOr<int64_t> Integer(std::string_view key, const std::string& text, int64_t lo, int64_t hi,
                          std::string_view unit) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end) {
    return InvalidArgumentError(std::string(key) + ": '" + text + "' is not an integer (" + std::string(unit) + ")");
  }
  if (v < lo || v > hi) {
    return InvalidArgumentError(std::string(key) + ": " + text + " is out of range " + std::to_string(lo) + ".." +
                                std::to_string(hi) + " (" + std::string(unit) + ")");
  }
  return v;
}

}  // namespace

std::string_view AskModeName(AskMode mode) {
  switch (mode) {
    case AskMode::kWhole: return "whole";
    case AskMode::kShare: return "share";
    case AskMode::kMig: return "mig";
  }
  return "?";
}

StatusOr<int64_t> ParseQuantityBytes(std::string_view text) {
  const std::string shown = "'" + std::string(text) + "'";
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string_view number = text.substr(0, i);
  const std::string_view suffix = text.substr(i);
  if (number.empty() || number.front() == '.' || number.back() == '.' ||
      number.find('.') != number.rfind('.')) {
    return InvalidArgumentError(shown + " is not a quantity (e.g. 10Gi, 512Mi, 16G)");
  }
  double scale = 1;
  if (suffix.empty()) {
  } else if (suffix == "Ki") scale = 1024.0;
  else if (suffix == "Mi") scale = std::pow(1024.0, 2);
  else if (suffix == "Gi") scale = std::pow(1024.0, 3);
  else if (suffix == "Ti") scale = std::pow(1024.0, 4);
  else if (suffix == "Pi") scale = std::pow(1024.0, 5);
  else if (suffix == "Ei") scale = std::pow(1024.0, 6);
  else if (suffix == "k") scale = 1e3;
  else if (suffix == "M") scale = 1e6;
  else if (suffix == "G") scale = 1e9;
  else if (suffix == "T") scale = 1e12;
  else if (suffix == "P") scale = 1e15;
  else if (suffix == "E") scale = 1e18;
  else if ((suffix[0] == 'e' || suffix[0] == 'E') && suffix.size() > 1) {
    int exp = 0;
    auto [p, ec] = std::from_chars(suffix.data() + 1, suffix.data() + suffix.size(), exp);
    if (ec != std::errc() || p != suffix.data() + suffix.size() || exp < 0 || exp > 18) {
      return InvalidArgumentError(shown + ": bad exponent (e0..e18)");
    }
    scale = std::pow(10.0, exp);
  } else {
    return InvalidArgumentError(shown + ": unknown suffix '" + std::string(suffix) +
                                "' (use Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E)");
  }
  const double value = std::stod(std::string(number)) * scale;
  if (!(value <= 4.6e18)) return InvalidArgumentError(shown + " is too large");
  return static_cast<int64_t>(std::ceil(value));  // Kubernetes rounds byte quantities up
}

StatusOr<std::optional<GpuAsk>> ParseGpuAsk(const Annotations& a) {
  const std::string* mode = Find(a, kModeAnnotation);
  const std::string* count = Find(a, kCountAnnotation);
  const std::string* compute = Find(a, kComputeAnnotation);
  const std::string* memory = Find(a, kMemoryAnnotation);
  const std::string* profile = Find(a, kMigProfileAnnotation);
  const std::string* model = Find(a, kModelAnnotation);
  if (!mode && !count && !compute && !memory && !profile && !model) return std::optional<GpuAsk>();
  GpuAsk ask;
  if (model) {
    if (model->empty()) return InvalidArgumentError(std::string(kModelAnnotation) + ": empty (leave it out for any model)");
    ask.model = *model;
  }
  if (mode) {
    if (*mode == "whole") ask.mode = AskMode::kWhole;
    else if (*mode == "share") ask.mode = AskMode::kShare;
    else if (*mode == "mig") ask.mode = AskMode::kMig;
    else return InvalidArgumentError(std::string(kModeAnnotation) + ": '" + *mode + "' is not whole, share or mig");
  } else if (profile) {
    ask.mode = AskMode::kMig;
  } else if (compute && *compute != "1000") {
    ask.mode = AskMode::kShare;
  }
  if (count) {
    TESSERA_ASSIGN_OR_RETURN(const int64_t n, Integer(kCountAnnotation, *count, 1, 16, "GPUs per pod"));
    if (n != 1 && ask.mode != AskMode::kWhole) {
      return InvalidArgumentError(std::string(kCountAnnotation) + ": " + *count + " GPUs: only whole GPUs come in counts (mode " +
                                  std::string(AskModeName(ask.mode)) + " takes 1)");
    }
    ask.count = static_cast<int32_t>(n);
  }
  if (compute) {
    TESSERA_ASSIGN_OR_RETURN(const int64_t c, Integer(kComputeAnnotation, *compute, 1, 1000, "milli-GPU"));
    ask.compute_milli = static_cast<int32_t>(c);
  }
  if (memory) {
    StatusOr<int64_t> bytes = ParseQuantityBytes(*memory);
    if (!bytes.ok()) return bytes.status().WithPrefix(kMemoryAnnotation);
    ask.memory_mib = (*bytes + (1 << 20) - 1) >> 20;
    if (ask.memory_mib <= 0) return InvalidArgumentError(std::string(kMemoryAnnotation) + ": '" + *memory + "' is zero");
  }
  switch (ask.mode) {
    case AskMode::kWhole:
      if (compute && ask.compute_milli != 1000) {
        return InvalidArgumentError(std::string(kComputeAnnotation) + ": " + *compute +
                                    " with mode whole (a whole GPU is 1000; use mode share for a fraction)");
      }
      if (profile) return InvalidArgumentError(std::string(kMigProfileAnnotation) + ": only with mode mig");
      ask.compute_milli = 1000;
      ask.memory_mib = 0;
      break;
    case AskMode::kShare:
      if (!compute) return InvalidArgumentError(std::string(kComputeAnnotation) + ": required with mode share (milli-GPU, 1..999)");
      if (ask.compute_milli == 1000) {
        return InvalidArgumentError(std::string(kComputeAnnotation) + ": 1000 with mode share (that is a whole GPU: use mode whole)");
      }
      if (profile) return InvalidArgumentError(std::string(kMigProfileAnnotation) + ": only with mode mig");
      break;
    case AskMode::kMig:
      if (!profile || profile->empty()) {
        return InvalidArgumentError(std::string(kMigProfileAnnotation) + ": required with mode mig (e.g. 3g.40gb)");
      }
      if (compute || memory) {
        return InvalidArgumentError(std::string(compute ? kComputeAnnotation : kMemoryAnnotation) +
                                    ": not with mode mig (the profile fixes compute and memory)");
      }
      ask.mig_profile = *profile;
      ask.compute_milli = 0;  // set per model by the extender
      break;
  }
  return std::optional<GpuAsk>(std::move(ask));
}

}  // namespace tessera::k8s
