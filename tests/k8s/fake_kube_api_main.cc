// tessera_k8s_fake_kube_api: the fake API server of tests/k8s/fake_kube_api.h as a program, for
// the ctest that runs the real `tessera k8s dra-driver` against it (dra_driver_cli_test.sh).
//
//   tessera_k8s_fake_kube_api STATE_FILE [OBJECT.json ...]
//
// Stores each OBJECT (a ResourceClaim under its namespace, a ResourceSlice, a Node), serves on
// 127.0.0.1 at a free port, prints "listening on PORT" and runs until SIGTERM/SIGINT; then writes
// STATE_FILE: {"resourceslices": {name: object}, "requests": ["GET /apis/...", ...]}.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/k8s/fake_kube_api.h"

using nlohmann::json;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tessera_k8s_fake_kube_api STATE_FILE [OBJECT.json ...]\n");
    return 2;
  }
  tessera::k8s::testing::FakeKubeApi api;
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i]);
    std::stringstream text;
    text << in.rdbuf();
    json o = json::parse(text.str(), nullptr, false);
    if (!o.is_object() || !o.contains("kind") || !o.contains("metadata")) {
      std::fprintf(stderr, "fake API server: %s: not a Kubernetes object\n", argv[i]);
      return 2;
    }
    const std::string kind = o["kind"];
    if (kind == "ResourceClaim") api.Put(o["metadata"]["namespace"].get<std::string>() + "/resourceclaims", o);
    else if (kind == "ResourceSlice") api.Put("resourceslices", o);
    else if (kind == "Node") api.Put("nodes", o);
    else {
      std::fprintf(stderr, "fake API server: %s: kind %s is not served\n", argv[i], kind.c_str());
      return 2;
    }
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  tessera::daemon::HttpServer server({.listen_port = 0});
  tessera::Status st = tessera::k8s::testing::ServeFakeKubeApi(api, server);
  if (st.ok()) st = server.Start();
  if (!st.ok()) {
    std::fprintf(stderr, "fake API server: %s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("listening on %u\n", static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  server.Stop();
  json state = {{"resourceslices", api.Objects("resourceslices")}, {"requests", api.requests()}};
  std::ofstream(argv[1]) << state.dump(1) << "\n";
  return 0;
}
