// Text for HTML: the one escaping every HTML report tessera writes uses (the simulator's report,
// the scenario's metering sections, the invoice's HTML rendering).
//
//   HtmlEscape("a<b & \"c\"") -> "a&lt;b &amp; &quot;c&quot;"
//
// Escapes the five characters that can end an element or an attribute value ('<', '>', '&', '"',
// '\''), so the result is safe in text and in single- or double-quoted attributes. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace tessera {

std::string HtmlEscape(std::string_view text);

}  // namespace tessera
