#include "src/integrations/k8s/extender_args.h"

#include <cstring>
#include <optional>

namespace tessera::k8s {
namespace {

using nlohmann::json;

Status NotJson(size_t at) {
  return InvalidArgumentError("the body is not JSON (error at character " + std::to_string(at + 1) +
                              "; an ExtenderArgs object is expected)");
}

// Splits JSON text into values without building them.
class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}
  size_t pos() const { return i_; }
  void Seek(size_t at) { i_ = at; }
  bool AtEnd() {
    Ws();
    return i_ == s_.size();
  }
  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool Eat(char c) {
    Ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  char Peek() {
    Ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  // A string token at the cursor: the text between its quotes and whether that is its value
  // (plain ASCII without escapes), or false when there is none.
  bool Token(std::string_view* raw, bool* plain) {
    Ws();
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    const size_t start = i_++;
    // The common case first: no backslash before the closing quote (then that quote ends it).
    if (const void* q = std::memchr(s_.data() + i_, '"', s_.size() - i_); q != nullptr) {
      const size_t end = static_cast<size_t>(static_cast<const char*>(q) - s_.data());
      bool backslash = false;
      bool special = false;
      for (size_t k = i_; k < end; ++k) {
        const auto u = static_cast<unsigned char>(s_[k]);
        backslash |= u == '\\';
        special |= u < 0x20 || u >= 0x80;
      }
      if (!backslash) {
        *plain = !special;
        i_ = end + 1;
        *raw = s_.substr(start + 1, end - start - 1);
        return true;
      }
    }
    *plain = true;
    while (i_ < s_.size() && s_[i_] != '"') {
      const auto u = static_cast<unsigned char>(s_[i_]);
      if (u == '\\') {
        *plain = false;
        ++i_;
      } else if (u < 0x20 || u >= 0x80) {
        *plain = false;
      }
      ++i_;
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    *raw = s_.substr(start + 1, i_ - start - 2);
    return true;
  }
  // A string token's value: plain ones as they are, the rest through nlohmann (escapes, UTF-8
  // checks). nullopt when there is no valid string at the cursor.
  std::optional<std::string> String() {
    std::string_view raw;
    bool plain = false;
    if (!Token(&raw, &plain)) return std::nullopt;
    if (plain) return std::string(raw);
    return Unescape(raw);
  }
  static std::optional<std::string> Unescape(std::string_view raw) {
    json v = json::parse(std::string_view(raw.data() - 1, raw.size() + 2), nullptr, false);
    if (!v.is_string()) return std::nullopt;
    return std::move(v.get_ref<std::string&>());
  }
  // The extent of the value at the cursor (not checked inside: the caller parses or accepts it).
  std::optional<std::string_view> Value() {
    Ws();
    const size_t start = i_;
    int depth = 0;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '"') {
        // Checked as String() checks it, without copying the plain ones (most of a body).
        std::string_view raw;
        bool plain = false;
        if (!Token(&raw, &plain) || (!plain && !Unescape(raw))) return std::nullopt;
        if (depth == 0) break;
        continue;
      }
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (depth == 0) break;  // the end of the enclosing object
        if (--depth == 0) {
          ++i_;
          break;
        }
      } else if (depth == 0 && (c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t')) {
        break;
      }
      ++i_;
    }
    if (i_ == start || depth != 0) return std::nullopt;
    return s_.substr(start, i_ - start);
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

Status ReadStringMap(const json& meta, const char* key, std::map<std::string, std::string, std::less<>>& out) {
  auto it = meta.find(key);
  if (it == meta.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return InvalidArgumentError(std::string("Pod.metadata.") + key + ": not an object");
  for (auto& [k, v] : it->items()) {
    if (!v.is_string()) return InvalidArgumentError(std::string("Pod.metadata.") + key + "." + k + ": not a string");
    out.emplace(k, v.get<std::string>());
  }
  return Status::Ok();
}

std::string StringAt(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Status ReadPod(std::string_view text, Args& a) {
  const json pod = json::parse(text, nullptr, false);
  if (pod.is_discarded()) return InvalidArgumentError("Pod: not JSON");
  if (pod.is_null()) return Status::Ok();
  if (!pod.is_object()) return InvalidArgumentError("Pod: not an object");
  auto meta = pod.find("metadata");
  if (meta == pod.end() || meta->is_null()) return Status::Ok();
  if (!meta->is_object()) return InvalidArgumentError("Pod.metadata: not an object");
  a.pod_name = StringAt(*meta, "name");
  a.pod_namespace = StringAt(*meta, "namespace");
  TESSERA_RETURN_IF_ERROR(ReadStringMap(*meta, "annotations", a.annotations));
  return ReadStringMap(*meta, "labels", a.labels);
}

// Nodes: a v1.NodeList; true when given (not null).
StatusOr<bool> ReadNodes(std::string_view text, Args& a) {
  json nodes = json::parse(text, nullptr, false);
  if (nodes.is_discarded()) return InvalidArgumentError("Nodes: not JSON");
  if (nodes.is_null()) return false;
  if (!nodes.is_object()) return InvalidArgumentError("Nodes: not an object (a v1.NodeList)");
  auto items = nodes.find("items");
  if (items != nodes.end() && !items->is_null()) {
    if (!items->is_array()) return InvalidArgumentError("Nodes.items: not an array");
    a.node_items = std::move(*items);
  }
  a.names.clear();
  a.names.reserve(a.node_items.size());
  for (size_t i = 0; i < a.node_items.size(); ++i) {
    const json& item = a.node_items[i];
    std::string_view name;
    if (item.is_object()) {
      auto meta = item.find("metadata");
      if (meta != item.end() && meta->is_object()) {
        auto n = meta->find("name");
        if (n != meta->end() && n->is_string()) name = n->get_ref<const std::string&>();
      }
    }
    if (name.empty()) return InvalidArgumentError("Nodes.items[" + std::to_string(i) + "].metadata.name: missing");
    a.names.push_back(name);
  }
  return true;
}

// NodeNames: an array of strings, read without a document; true when given (not null).
StatusOr<bool> ReadNodeNames(std::string_view text, Args& a) {
  if (text == "null") return false;
  Scanner s(text);
  if (!s.Eat('[')) {
    if (!json::accept(text)) return InvalidArgumentError("NodeNames: not JSON");
    return InvalidArgumentError("NodeNames: not an array");
  }
  a.names.clear();
  if (s.Eat(']')) return s.AtEnd() ? StatusOr<bool>(true) : InvalidArgumentError("NodeNames: not JSON");
  while (true) {
    std::string_view raw;
    bool plain = false;
    if (s.Peek() != '"') {
      std::optional<std::string_view> v = s.Value();
      if (!v || !json::accept(*v)) return InvalidArgumentError("NodeNames: not JSON");
      return InvalidArgumentError("NodeNames[" + std::to_string(a.names.size()) + "]: not a string");
    }
    if (!s.Token(&raw, &plain)) return InvalidArgumentError("NodeNames: not JSON");
    if (plain) {
      a.names.push_back(raw);
    } else {
      std::optional<std::string> name = Scanner::Unescape(raw);
      if (!name) return InvalidArgumentError("NodeNames[" + std::to_string(a.names.size()) + "]: not a JSON string");
      a.names.push_back(a.owned.emplace_back(std::move(*name)));
    }
    if (s.Eat(',')) continue;
    if (s.Eat(']') && s.AtEnd()) return true;
    return InvalidArgumentError("NodeNames: not JSON (after element " + std::to_string(a.names.size() - 1) + ")");
  }
}

// NodeNames in the common form, an array of plain strings (no escapes, ASCII), read at the
// cursor in one pass while the top level is split: true with the names (views into the body) and
// the cursor after the array; false (cursor unspecified) for anything else, which is then read
// the general way (ReadNodeNames), errors included.
bool ReadPlainNames(Scanner& s, std::vector<std::string_view>& names) {
  names.clear();
  if (!s.Eat('[')) return false;
  if (s.Eat(']')) return true;
  while (true) {
    std::string_view raw;
    bool plain = false;
    if (!s.Token(&raw, &plain) || !plain) return false;
    names.push_back(raw);
    if (s.Eat(',')) continue;
    return s.Eat(']');
  }
}

}  // namespace

StatusOr<Args> DecodeArgs(std::string_view body) {
  Scanner s(body);
  if (!s.Eat('{')) {
    if (json::accept(body)) return InvalidArgumentError("the body must be a JSON object (ExtenderArgs)");
    return NotJson(s.pos());
  }
  Args a;
  std::optional<std::string_view> pod, nodes, node_names;
  std::vector<std::string_view> plain_names;  // NodeNames, when ReadPlainNames read the last one
  bool names_read = false;
  if (!s.Eat('}')) {
    while (true) {
      std::optional<std::string> key = s.String();
      if (!key || !s.Eat(':')) return NotJson(s.pos());
      if (*key == "NodeNames") {
        s.Ws();
        const size_t at = s.pos();
        if (ReadPlainNames(s, plain_names)) {
          node_names = body.substr(at, s.pos() - at);
          names_read = true;
          if (s.Eat(',')) continue;
          if (s.Eat('}')) break;
          return NotJson(s.pos());
        }
        s.Seek(at);
        names_read = false;
      }
      std::optional<std::string_view> value = s.Value();
      if (!value) return NotJson(s.pos());
      if (*key == "Pod") {
        pod = value;
      } else if (*key == "Nodes") {
        nodes = value;
      } else if (*key == "NodeNames") {
        node_names = value;
      } else if (!json::accept(*value)) {
        return NotJson(s.pos());
      }
      if (s.Eat(',')) continue;
      if (s.Eat('}')) break;
      return NotJson(s.pos());
    }
  }
  if (!s.AtEnd()) return NotJson(s.pos());
  if (pod) TESSERA_RETURN_IF_ERROR(ReadPod(*pod, a));
  if (a.pod_namespace.empty()) a.pod_namespace = "default";
  bool given = false;
  if (nodes) {
    TESSERA_ASSIGN_OR_RETURN(given, ReadNodes(*nodes, a));
    a.nodes_mode = given;
  }
  if (!given && node_names) {
    if (names_read) {
      a.names = std::move(plain_names);
      a.names_plain = true;
      given = true;
    } else {
      TESSERA_ASSIGN_OR_RETURN(given, ReadNodeNames(*node_names, a));
      a.names_plain = given && a.owned.empty();
    }
  }
  if (!given) return InvalidArgumentError("neither Nodes nor NodeNames is given");
  return a;
}

}  // namespace tessera::k8s
