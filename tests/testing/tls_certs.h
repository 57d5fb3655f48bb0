// Throwaway TLS certificates for tests, made by the `openssl` command (scripts/setup installs
// it): a self-signed certificate that is its own CA.
//
//   TempDir dir;
//   TlsFiles tls = MakeSelfSignedCert(dir, "server");   // dir/server.crt, dir/server.key
//   ASSERT_TRUE(tls.ok()) << tls.error;
//   // serve with tls.cert + tls.key; clients trust tls.cert as their CA file
//
// The default names are CN=localhost with subjectAltName IP:127.0.0.1 and DNS:localhost; valid
// for one day. Thread-safety: distinct names per call.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/testing/sim_test_util.h"

namespace tessera::testing {

struct TlsFiles {
  std::string cert, key;
  std::string error;  // why it failed (empty: ok)
  bool ok() const { return error.empty(); }
};

inline TlsFiles MakeSelfSignedCert(const TempDir& dir, const std::string& name,
                                   const std::string& alt_names = "IP:127.0.0.1,DNS:localhost") {
  TlsFiles f{dir.File(name + ".crt"), dir.File(name + ".key"), ""};
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
                          "'subjectAltName=" + alt_names + "' -keyout '" + f.key + "' -out '" + f.cert + "'";
  CommandResult r = RunCommand(cmd, dir);
  if (r.exit_code != 0 || !std::filesystem::exists(f.cert) || !std::filesystem::exists(f.key))
    f.error = "openssl req failed (exit " + std::to_string(r.exit_code) + "): " + r.err;
  return f;
}

}  // namespace tessera::testing
