// API tokens of `tessera serve`: a token is shown once when it is made; the store keeps only its
// SHA-256 hash, and a presented token is checked by hashing it and comparing the hashes in
// constant time (so that response timing tells nothing about how much of a guess was right).
//
//   std::string token = *NewToken();          // "tsr_" + 43 URL-safe base64 characters (256 bits)
//   std::string stored = TokenHash(token);     // 64 hex digits, what the store keeps
//   TokenHashesEqual(TokenHash(presented), stored)
//
// Thread-safety: free functions, safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "tessera/core/status.h"

namespace tessera::daemon {

inline constexpr std::string_view kTokenPrefix = "tsr_";

// 32 bytes from OpenSSL's CSPRNG. INTERNAL if it cannot be seeded.
StatusOr<std::string> NewToken();
// Lower-case hex SHA-256 of the token's bytes.
std::string TokenHash(std::string_view token);
// Constant time in the length of the strings (which are both 64 characters for hashes).
bool TokenHashesEqual(std::string_view a, std::string_view b);
// The token of an "Authorization: Bearer <token>" header value, or "" (scheme case-insensitive).
std::string BearerToken(std::string_view authorization);

}  // namespace tessera::daemon
