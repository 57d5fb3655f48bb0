// Where JSON text stops being JSON, for error messages that point at the byte a user must fix.
//
// Called by the decoders that take JSON from users or peers (tessera::api's ParseJsonObject, the
// MIG plan file reader) after nlohmann's non-throwing parse said "discarded". Pure functions over
// the text; thread-safe. nlohmann stays behind this header.
//
//   JsonErrorOffset("{\"a\": 1}")          -> 0 (the text parses)
//   JsonErrorOffset("{\"a\": }")           -> 7 (1-based: the '}' where a value was expected)
//   LineColumnAt("{\n  \"a\": }", 10)     -> "2:8"
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera {

// The 1-based byte offset at which parsing `text` as JSON fails (nlohmann counts the failing
// byte), or 0 when it parses.
size_t JsonErrorOffset(std::string_view text);

// "line:column" (both 1-based) of the 1-based byte offset `offset` in `text`.
std::string LineColumnAt(std::string_view text, size_t offset);

}  // namespace tessera
