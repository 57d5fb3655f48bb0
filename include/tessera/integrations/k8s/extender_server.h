// The scheduler extender's HTTP/1.1 transport: a small Boost.Beast server (the daemon module's
// server is private to `tessera serve`, and k8s may not depend on daemon: module_deps.txt) that
// maps kube-scheduler's calls onto an Extender:
//
//   POST <prefix>/filter      -> Extender::Filter      (ExtenderArgs -> ExtenderFilterResult)
//   POST <prefix>/prioritize  -> Extender::Prioritize  (ExtenderArgs -> HostPriorityList)
//   GET  <prefix>/healthz, GET /healthz -> Extender::Health
// Anything else: 404 (unknown path) or 405 (known path, other method), JSON {"Error": "..."}.
// A request that is not HTTP gets 400 and the connection is closed; a body over max_body_bytes
// 413. Keep-alive connections (kube-scheduler's Go client reuses them) each hold one thread,
// at most max_connections at once (a further one gets 503 and is closed); an idle connection is
// closed after idle_timeout_s.
//
//   Extender* e = ...;
//   ExtenderServer server(e, {.host = "127.0.0.1", .port = 0});
//   TESSERA_RETURN_IF_ERROR(server.Start());   // server.port(): the bound port
//   ...
//   server.Stop();                             // closes the listener and every connection
//
// Thread-safety: Start and Stop from one thread; the Extender is called from the connection
// threads concurrently (it is safe for that).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "tessera/core/status.h"
#include "tessera/integrations/k8s/extender.h"

namespace tessera::k8s {

struct ExtenderServerOptions {
  std::string host = "127.0.0.1";   // the address to listen on ("0.0.0.0": every interface)
  int port = 8890;                  // 0: any free port (see port())
  std::string url_prefix;           // "" or "/tessera": the path before /filter, no trailing '/'
  size_t max_body_bytes = 256u << 20;  // a full v1.NodeList of 5,000 nodes is ~20-40 MiB
  int max_connections = 64;
  int idle_timeout_s = 120;
};

class ExtenderServer {
 public:
  ExtenderServer(Extender* extender, ExtenderServerOptions options);
  ~ExtenderServer();
  ExtenderServer(const ExtenderServer&) = delete;
  ExtenderServer& operator=(const ExtenderServer&) = delete;

  // Binds and starts accepting. UNAVAILABLE naming the address when it cannot bind.
  Status Start();
  int port() const { return port_; }
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace tessera::k8s
