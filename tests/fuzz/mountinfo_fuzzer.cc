// libFuzzer target: the backstop's /proc readers (tessera/integrations/k8s/proc_text.h), whatever
// the bytes, never crash, hang or read out of bounds, and what they return is what they document.
//
// Input: a first line "<mount point>\t<root>" (the case), then a mountinfo text (also read as a
// cgroup text). Properties, each of which a wrong parser fails:
//   * SlotFileOfMountinfo(text, point): nullopt, or a non-empty name with no '/' (a path's last
//     component);
//   * with a line the kernel would write appended (fields separated by one ' ', root and mount
//     point with ' ', '\t', '\n' and '\\' as \ooo, optionally "//deleted" after the root), the
//     answer is the last component of that root: the topmost mount decides;
//   * with a line for another mount point appended instead, the answer does not change;
//   * PodUidOfCgroup(text): nullopt, or 8-4-4-4-12 lowercase hex digits joined by '-' that the text
//     holds after a "pod" ('-' there may be '_'); a systemd line of another pod appended changes
//     nothing when the text named a pod, and is the answer when it did not.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/integrations/k8s/proc_text.h"

namespace {

using tessera::k8s::PodUidOfCgroup;
using tessera::k8s::SlotFileOfMountinfo;

void Check(bool ok) {
  if (!ok) std::abort();
}

// The kernel's mangling of a mountinfo path field (seq_escape with " \t\n\\").
std::string KernelEscape(std::string_view path) {
  std::string out;
  for (char c : path) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      const unsigned u = static_cast<unsigned char>(c);
      out += '\\';
      out += static_cast<char>('0' + ((u >> 6) & 7));
      out += static_cast<char>('0' + ((u >> 3) & 7));
      out += static_cast<char>('0' + (u & 7));
    } else {
      out += c;
    }
  }
  return out;
}

std::string KernelLine(std::string_view root, std::string_view point, bool deleted) {
  return "9001 1 259:1 " + KernelEscape(root) + (deleted ? "//deleted" : "") + " " + KernelEscape(point) +
         " ro,relatime shared:7 - ext4 /dev/nvme0n1p1 rw\n";
}

// A path as the kernel has it: '/' + the non-empty components, no NUL.
std::string AsPath(std::string_view raw, std::string* last) {
  std::string path;
  last->clear();
  size_t at = 0;
  while (at <= raw.size()) {
    size_t end = raw.find('/', at);
    if (end == std::string_view::npos) end = raw.size();
    std::string part;
    for (char c : raw.substr(at, end - at))
      if (c != '\0') part += c;
    if (!part.empty()) {
      path += "/" + part;
      *last = part;
    }
    at = end + 1;
  }
  return path.empty() ? "/" : path;
}

bool IsUid(const std::string& uid) {
  if (uid.size() != 36) return false;
  for (size_t i = 0; i < 36; ++i) {
    const char c = uid[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool TextHoldsPod(std::string_view text, const std::string& uid) {
  for (size_t at = text.find("pod"); at != std::string_view::npos; at = text.find("pod", at + 1)) {
    if (at + 3 + uid.size() > text.size()) break;
    bool same = true;
    for (size_t i = 0; i < uid.size() && same; ++i) {
      const char c = text[at + 3 + i];
      same = c == uid[i] || (uid[i] == '-' && c == '_');
    }
    if (same) return true;
  }
  return false;
}

void CheckMountinfo(std::string_view text, std::string_view case_line) {
  const size_t tab = case_line.find('\t');
  std::string ignored, name;
  const std::string point = AsPath(case_line.substr(0, tab), &ignored);
  const std::string root = AsPath(tab == std::string_view::npos ? "" : case_line.substr(tab + 1), &name);

  const std::optional<std::string> found = SlotFileOfMountinfo(text, point);
  if (found) Check(!found->empty() && found->find('/') == std::string::npos);

  const std::string base = std::string(text) + "\n";
  if (!name.empty()) {
    for (bool deleted : {false, true}) {
      const std::optional<std::string> top = SlotFileOfMountinfo(base + KernelLine(root, point, deleted), point);
      Check(top == name);
    }
  }
  const std::string other = point == "/" ? "/other" : point + "/other";
  Check(SlotFileOfMountinfo(base + KernelLine(root, other, false), point) == found);
}

void CheckCgroup(std::string_view text) {
  const std::optional<std::string> pod = PodUidOfCgroup(text);
  if (pod) Check(IsUid(*pod) && TextHoldsPod(text, *pod));
  constexpr char kOther[] = "0123abcd-0000-4000-8000-00000000ffff";
  const std::string line = "\n0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
                           "0123abcd_0000_4000_8000_00000000ffff.slice/cri-containerd-ab12.scope\n";
  Check(PodUidOfCgroup(std::string(text) + line) == (pod ? *pod : std::string(kOther)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view case_line = input.substr(0, newline);
  const std::string_view text = newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  CheckMountinfo(text, case_line);
  CheckCgroup(input);
  return 0;
}
