// Money and exact amounts for metering: integer micro-units, exact rational charges and the one
// rounding rule of every invoice.
//
// Money is int64 micro-units of the plan's currency (1 USD = 1,000,000 micro). A charge is first
// computed exactly, as a numerator over a positive denominator (128-bit integers: a quantity in
// its base unit times a price in micro per billing unit, over the base units per billing unit).
//
// The rounding rule (the only one): the charges that price one thing (a "pool": one price item
// of one plan over all the accounts that used it, one reservation, the idle capacity of one model,
// one credit rule) are summed exactly; the pool's total is rounded once, half away from zero; that
// rounded total is split among the pool's lines by the largest-remainder (Hamilton) method: each
// line gets its exact amount rounded toward zero, and the micro-units still missing go one each to
// the lines with the largest remainders (ties: the earlier line, lines being ordered by account
// name then description). So every line is within one micro-unit of its exact amount, and the lines
// of a pool sum to the pool's rounded total exactly: the sum of all accounts' lines is the metered
// total (the sum of the pools' rounded totals) to the micro-unit.
//
//   Allocate({1, 1, 1}, 3)       -> exact 1/3 each, pool total 1 -> {1, 0, 0}
//   Allocate({5, 5}, 10)         -> exact 0.5 each, pool 1.0 -> 1 -> {1, 0}
//   Allocate({15, 15}, 10)       -> exact 1.5 each, pool 3 -> floors {1, 1}, one more -> {2, 1}
//
// Callers: metering/invoice.cc; the tests. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::metering {

__extension__ typedef __int128 Int128;  // __extension__: GCC and clang, silent under -Wpedantic
using Micro = int64_t;  // money: micro-units of the plan's currency

inline constexpr Micro kMicroPerUnit = 1'000'000;

// round(num / den), half away from zero; den > 0.
Int128 RoundHalfAway(Int128 num, Int128 den);

// The pool rule above: `nums[i] / den` are the exact amounts of the pool's lines (all of one
// sign, den > 0); returns the rounded lines, which sum to RoundHalfAway(sum(nums), den).
std::vector<Micro> Allocate(const std::vector<Int128>& nums, Int128 den);

// "12.5" or "0.000125" or "3" -> micro-units (12500000, 125, 3000000): at most 6 decimals,
// optional leading '-'; INVALID_ARGUMENT otherwise (message names no field: callers prefix it).
StatusOr<Micro> ParseDecimalMicro(std::string_view text);
// 12500000 -> "12.500000"; -125 -> "-0.000125".
std::string FormatMicro(Micro micro);
// An exact rational as a decimal with `decimals` places (rounded half away), e.g. for
// quantities: FormatRational(7, 2, 3) -> "3.500".
std::string FormatRational(Int128 num, Int128 den, int decimals);

}  // namespace tessera::metering
