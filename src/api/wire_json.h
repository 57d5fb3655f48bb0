// What the api module's encoders share (private): writing a JSON value as the wire's bytes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tessera::api {

// Keys in order (nlohmann's objects), one line, invalid UTF-8 replaced (a message or a detail
// may quote a client's bytes): never throws.
inline std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tessera::api
