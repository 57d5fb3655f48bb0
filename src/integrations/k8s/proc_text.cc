// PodUidOfCgroup and SlotFileOfMountinfo (tessera/integrations/k8s/proc_text.h): the kubelet's
// cgroup path and the kernel's mountinfo lines, read without the rest of the backstop.
#include "tessera/integrations/k8s/proc_text.h"

#include <algorithm>

namespace tessera::k8s {
namespace {

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Whether `s` at `at` is a uid of 36 characters: 8-4-4-4-12 hex digits separated by '-' or '_'.
bool UidAt(std::string_view s, size_t at) {
  if (at + 36 > s.size()) return false;
  for (size_t i = 0; i < 36; ++i) {
    const char c = s[at + i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? (c != '-' && c != '_') : !IsHex(c)) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> PodUidOfCgroup(std::string_view text) {
  for (size_t at = text.find("pod"); at != std::string_view::npos; at = text.find("pod", at + 1)) {
    if (!UidAt(text, at + 3)) continue;
    std::string uid(text.substr(at + 3, 36));
    std::replace(uid.begin(), uid.end(), '_', '-');
    return uid;
  }
  return std::nullopt;
}

std::optional<std::string> SlotFileOfMountinfo(std::string_view text, std::string_view mount_point) {
  // Undoes mountinfo's escapes of ' ', '\t', '\n' and '\\' ("\040" etc.).
  auto unescape = [](std::string_view field) {
    std::string out;
    for (size_t i = 0; i < field.size(); ++i) {
      if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' && field[i + 1] <= '3' &&
          field[i + 2] >= '0' && field[i + 2] <= '7' && field[i + 3] >= '0' && field[i + 3] <= '7') {
        out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
        i += 3;
      } else {
        out += field[i];
      }
    }
    return out;
  };
  std::optional<std::string> found;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    // The kernel separates the fields with ' ' and escapes ' ', '\t', '\n' and '\\' in a path:
    // any other byte ('\v', '\f', '\r' too) belongs to its field. Fields 4 and 5: root, mount point.
    std::string_view fields[5];
    size_t n = 0;
    for (size_t at = 0; at < line.size() && n < 5;) {
      const size_t space = std::min(line.find(' ', at), line.size());
      if (space > at) fields[n++] = line.substr(at, space - at);
      at = space + 1;
    }
    if (n < 5 || unescape(fields[4]) != mount_point) continue;
    std::string file = unescape(fields[3]);
    if (file.ends_with("//deleted")) file.resize(file.size() - 9);
    file = file.substr(file.find_last_of('/') + 1);  // npos + 1 = 0: the whole root
    if (!file.empty()) found = file;
  }
  return found;
}

}  // namespace tessera::k8s
