#include "tessera/metering/money.h"

#include <algorithm>
#include <numeric>

namespace tessera::metering {

Int128 RoundHalfAway(Int128 num, Int128 den) {
  const bool neg = num < 0;
  const Int128 a = neg ? -num : num;
  const Int128 q = a / den, r = a % den;
  const Int128 rounded = (2 * r >= den) ? q + 1 : q;
  return neg ? -rounded : rounded;
}

std::vector<Micro> Allocate(const std::vector<Int128>& nums, Int128 den) {
  std::vector<Micro> out(nums.size(), 0);
  if (nums.empty()) return out;
  bool neg = false;
  Int128 total = 0;
  for (Int128 n : nums) {
    if (n < 0) neg = true;
    total += n < 0 ? -n : n;
  }
  const Int128 target = RoundHalfAway(total, den);
  Int128 floors = 0;
  std::vector<Int128> rem(nums.size());
  for (size_t i = 0; i < nums.size(); ++i) {
    const Int128 a = nums[i] < 0 ? -nums[i] : nums[i];
    out[i] = static_cast<Micro>(a / den);
    rem[i] = a % den;
    floors += a / den;
  }
  Int128 missing = target - floors;  // 0 <= missing <= lines with a remainder (see money.h)
  if (missing > 0) {
    std::vector<size_t> order(nums.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
    for (size_t k = 0; k < order.size() && missing > 0; ++k, --missing) ++out[order[k]];
  }
  if (neg) {
    for (Micro& m : out) m = -m;
  }
  return out;
}

StatusOr<Micro> ParseDecimalMicro(std::string_view s) {
  const std::string text(s);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
    neg = s[i] == '-';
    ++i;
  }
  Int128 whole = 0, frac = 0;
  int int_digits = 0, frac_digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++int_digits) {
    whole = whole * 10 + (s[i] - '0');
    if (whole > Int128{1'000'000'000'000}) return InvalidArgumentError("'" + text + "' is too large");
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++frac_digits) {
      if (frac_digits >= 6) return InvalidArgumentError("'" + text + "' has more than 6 decimals");
      frac = frac * 10 + (s[i] - '0');
    }
  }
  if (i != s.size() || (int_digits == 0 && frac_digits == 0)) {
    return InvalidArgumentError("expected a decimal number, got '" + text + "'");
  }
  for (int d = frac_digits; d < 6; ++d) frac *= 10;
  const Int128 v = whole * kMicroPerUnit + frac;
  return static_cast<Micro>(neg ? -v : v);
}

std::string FormatMicro(Micro micro) {
  const bool neg = micro < 0;
  const uint64_t a = neg ? static_cast<uint64_t>(-(micro + 1)) + 1 : static_cast<uint64_t>(micro);
  std::string frac = std::to_string(a % kMicroPerUnit);
  frac.insert(0, 6 - frac.size(), '0');
  return (neg ? "-" : "") + std::to_string(a / kMicroPerUnit) + "." + frac;
}

namespace {
std::string Int128ToString(Int128 v) {
  if (v == 0) return "0";
  std::string s;
  const bool neg = v < 0;
  if (neg) v = -v;
  while (v > 0) {
    s.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  if (neg) s.push_back('-');
  std::reverse(s.begin(), s.end());
  return s;
}
}  // namespace

std::string FormatRational(Int128 num, Int128 den, int decimals) {
  Int128 scale = 1;
  for (int d = 0; d < decimals; ++d) scale *= 10;
  const Int128 scaled = RoundHalfAway(num * scale, den);
  const bool neg = scaled < 0;
  const Int128 a = neg ? -scaled : scaled;
  std::string out = (neg ? "-" : "") + Int128ToString(a / scale);
  if (decimals > 0) {
    std::string frac = Int128ToString(a % scale);
    frac.insert(0, static_cast<size_t>(decimals) - frac.size(), '0');
    out += "." + frac;
  }
  return out;
}

}  // namespace tessera::metering
