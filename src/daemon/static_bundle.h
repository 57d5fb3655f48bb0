// The dashboard's files (the built `ui/` bundle) served by `tessera serve` under /ui. Who calls
// it: the control plane (routes GET /ui, /ui/ and /ui/{file...}) and its tests.
//
// The folder is read once, at start, into memory: every regular file under it (symbolic links
// are skipped, so nothing outside the folder is ever read), at most `max_total_bytes` in all.
// A request is answered from that map only, so no request path ("../../etc/passwd",
// "%2e%2e/x", "a/./b") can reach a file the folder did not hold at start; a path with a "." or
// ".." segment, or a backslash or NUL, is refused (404) before the lookup. Replacing the files
// on disk takes effect at the next start.
//
// What an answer carries:
//   - the content type by extension (".js" text/javascript, ".css" text/css, ".svg"
//     image/svg+xml, ...; application/octet-stream for an unknown one);
//   - index.html (for "" and "index.html"): `Cache-Control: no-cache`, so a new bundle is seen at
//     once; the hashed files under assets/ (vite names them app-3f2a1c.js): a year, immutable;
//   - everywhere `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`, and on HTML a
//     Content-Security-Policy that allows this origin only (scripts, styles, connections).
//
// Worked example: a folder with index.html and assets/app-1a2b.js.
//   auto b = StaticBundle::Load("/usr/share/tessera/ui");   // 2 files
//   b->Serve("")                   -> 200 text/html; charset=utf-8, no-cache (index.html)
//   b->Serve("assets/app-1a2b.js") -> 200 text/javascript; charset=utf-8, max-age=31536000
//   b->Serve("../secret")          -> 404 not_found
//   b->Serve("assets")             -> 404 not_found (a folder is not a file)
//
// Thread-safety: Load from one thread; Serve is const and may be called from many at once.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "src/daemon/http_server.h"
#include "tessera/core/status.h"

namespace tessera::daemon {

class StaticBundle {
 public:
  // INVALID_ARGUMENT naming `dir` when it is not a folder, has no index.html, or holds more than
  // `max_total_bytes`; a file that cannot be read is named too.
  static StatusOr<StaticBundle> Load(const std::string& dir, size_t max_total_bytes = size_t{64} << 20);

  // The answer for a path relative to the folder ("" is index.html).
  HttpResponse Serve(std::string_view relative_path) const;

  size_t files() const { return files_.size(); }
  const std::string& dir() const { return dir_; }

 private:
  struct File {
    std::string content_type;
    std::string body;
  };
  std::string dir_;
  std::map<std::string, File, std::less<>> files_;  // "assets/app.js" -> contents
};

// The content type a file's extension calls for ("app.js" -> "text/javascript; charset=utf-8").
std::string ContentTypeForPath(std::string_view path);

}  // namespace tessera::daemon
