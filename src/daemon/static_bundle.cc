#include "src/daemon/static_bundle.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

namespace tessera::daemon {

namespace {

namespace fs = std::filesystem;

constexpr const char* kIndex = "index.html";
// Only this origin: the bundle is self-contained (no CDN, no inline script); uPlot sets element
// styles, hence 'unsafe-inline' for styles only.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

// Refuses what could name something outside the folder or be read two ways by a file system.
bool SafeRelativePath(std::string_view path) {
  if (path.find('\\') != std::string_view::npos || path.find('\0') != std::string_view::npos) return false;
  if (!path.empty() && path.front() == '/') return false;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t slash = path.find('/', at);
    const std::string_view seg = path.substr(at, slash == std::string_view::npos ? std::string_view::npos : slash - at);
    if (seg == "." || seg == "..") return false;
    if (slash == std::string_view::npos) break;
    at = slash + 1;
  }
  return true;
}

}  // namespace

std::string ContentTypeForPath(std::string_view path) {
  static const std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
      {".json", "application/json"}, {".map", "application/json"},
      {".svg", "image/svg+xml"}, {".png", "image/png"}, {".ico", "image/x-icon"},
      {".woff2", "font/woff2"}, {".txt", "text/plain; charset=utf-8"}};
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (const auto& [ext, type] : kTypes)
    if (name.size() > ext.size() && name.ends_with(ext)) return std::string(type);
  return "application/octet-stream";
}

StatusOr<StaticBundle> StaticBundle::Load(const std::string& dir, size_t max_total_bytes) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return InvalidArgumentError("dashboard folder '" + dir + "': not a folder");
  if (!fs::is_regular_file(fs::path(dir) / kIndex, ec))
    return InvalidArgumentError("dashboard folder '" + dir + "': no index.html (build it with the ui target)");
  StaticBundle b;
  b.dir_ = dir;
  size_t total = 0;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& e = *it;
    if (e.is_symlink(ec) || !e.is_regular_file(ec)) continue;  // a link could point outside
    const std::string rel = fs::relative(e.path(), dir, ec).generic_string();
    if (ec || !SafeRelativePath(rel)) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream body;
    body << in.rdbuf();
    if (!in.good() && !in.eof())
      return InvalidArgumentError("dashboard folder '" + dir + "': cannot read " + rel);
    total += body.str().size();
    if (total > max_total_bytes)
      return InvalidArgumentError("dashboard folder '" + dir + "': over " + std::to_string(max_total_bytes >> 20) +
                                  " MiB of files");
    b.files_[rel] = File{ContentTypeForPath(rel), std::move(body).str()};
  }
  if (ec) return InvalidArgumentError("dashboard folder '" + dir + "': " + ec.message());
  return b;
}

HttpResponse StaticBundle::Serve(std::string_view relative_path) const {
  const std::string_view want = relative_path.empty() ? std::string_view(kIndex) : relative_path;
  auto it = SafeRelativePath(want) ? files_.find(want) : files_.end();
  if (it == files_.end())
    return HttpResponse::Error(404, "not_found", "no such file in the dashboard: /ui/" + std::string(relative_path));
  HttpResponse r;
  r.status = 200;
  r.content_type = it->second.content_type;
  r.body = it->second.body;
  r.headers.push_back({"X-Content-Type-Options", "nosniff"});
  r.headers.push_back({"Referrer-Policy", "no-referrer"});
  if (want.starts_with("assets/"))
    r.headers.push_back({"Cache-Control", "public, max-age=31536000, immutable"});
  else
    r.headers.push_back({"Cache-Control", "no-cache"});
  if (want.ends_with(".html")) {
    r.headers.push_back({"Content-Security-Policy", kContentSecurityPolicy});
    r.headers.push_back({"X-Frame-Options", "DENY"});
  }
  return r;
}

}  // namespace tessera::daemon
