// The k8s node plugins' checkpoint files (src/integrations/k8s/checkpoint.h).
#include "src/integrations/k8s/checkpoint.h"

#include <fstream>
#include <sstream>

#include "tessera/integrations/k8s/container_edits.h"

namespace tessera::k8s {

using json = nlohmann::json;

Status CheckpointError(const std::string& path, const std::string& field, const std::string& problem) {
  return DataLossError("checkpoint '" + path + "': " + field + ": " + problem);
}

StatusOr<std::optional<json>> ReadCheckpoint(const std::string& path, int version, const std::string& list) {
  std::ifstream in(path);
  if (!in) return std::optional<json>();
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("version") || !doc["version"].is_number_integer() ||
      doc["version"].get<int>() != version || !doc.contains(list) || !doc[list].is_array()) {
    return DataLossError("checkpoint '" + path + "': not a version " + std::to_string(version) +
                         " checkpoint with a '" + list + "' list");
  }
  return std::optional<json>(std::move(doc));
}

Status WriteCheckpoint(const std::string& path, int version, json doc) {
  doc["version"] = version;
  return WriteFileAtomically(path, doc.dump(1) + "\n");
}

}  // namespace tessera::k8s
