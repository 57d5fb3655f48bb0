#include "tessera/core/json_error.h"

#include <nlohmann/json.hpp>

namespace tessera {

namespace {

using json = nlohmann::json;

// A SAX consumer that accepts everything and records where the parser gave up.
class ErrorOffset final : public json::json_sax_t {
 public:
  size_t position = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(json::number_integer_t) override { return true; }
  bool number_unsigned(json::number_unsigned_t) override { return true; }
  bool number_float(json::number_float_t, const json::string_t&) override { return true; }
  bool string(json::string_t&) override { return true; }
  bool binary(json::binary_t&) override { return true; }
  bool start_object(size_t) override { return true; }
  bool key(json::string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(size_t pos, const std::string&, const nlohmann::detail::exception&) override {
    position = pos;
    return false;
  }
};

}  // namespace

size_t JsonErrorOffset(std::string_view text) {
  ErrorOffset at;
  json::sax_parse(text.begin(), text.end(), &at);
  return at.position;
}

std::string LineColumnAt(std::string_view text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i + 1 < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

}  // namespace tessera
