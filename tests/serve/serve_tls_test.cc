// `tessera serve --tls-cert F --tls-key F` as a process: it prints an https:// address, and
// `tessera ctl --ca-file` (or $TESSERA_CA_FILE) talks to it, events stream included; a client
// without the CA is refused; TLS flags given half or pointing at unusable files exit 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/serve_process.h"
#include "tests/testing/sim_test_util.h"
#include "tests/testing/tls_certs.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kAdmin = "admin-token-for-the-tls-tests";

std::string Binary() { return "'" + std::string(TESSERA_BINARY) + "'"; }

TEST(ServeTls, CtlWithTheCaFileTalksToAnHttpsServe) {
  TempDir dir;
  const TlsFiles tls = MakeSelfSignedCert(dir, "server");
  ASSERT_TRUE(tls.ok()) << tls.error;
  ServeProcess serve({TESSERA_BINARY, "serve", "--db", dir.File("t.db"), "--listen", "127.0.0.1:0", "--tls-cert",
                      tls.cert, "--tls-key", tls.key},
                     {std::string("TESSERA_BOOTSTRAP_TOKEN=") + kAdmin});
  ASSERT_TRUE(serve.WaitListening()) << serve.output();
  EXPECT_THAT(serve.output(), HasSubstr("listening on https://127.0.0.1:" + std::to_string(serve.port())));
  const std::string server = "https://127.0.0.1:" + std::to_string(serve.port());
  const std::string ctl = "TESSERA_TOKEN=" + std::string(kAdmin) + " " + Binary() + " ctl --server " + server + " ";
  CommandResult r = RunCommand(ctl + "--ca-file '" + tls.cert + "' tenants create acme", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand(ctl + "--ca-file '" + tls.cert + "' tenants list", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("acme"));
  r = RunCommand("TESSERA_CA_FILE='" + tls.cert + "' " + ctl +
                     "workloads submit --tenant acme --gpus 1 --qos BestEffort --idempotency-key k1",
                 dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(RunCommand("TESSERA_CA_FILE='" + tls.cert + "' " + ctl + "workloads cancel 1", dir).exit_code, 0);
  // The event stream over TLS (the history replayed, then --count ends it).
  r = RunCommand(ctl + "--ca-file '" + tls.cert + "' events --workload 1 --after 0 --count 1", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::MatchesRegex("ID +TIME +TENANT +WORKLOAD +KIND +DETAIL\n"
                                             "[0-9]+ +[0-9T:-]+Z +acme +1 +cancelled +.*\n"));
  // Without the CA (the system's store does not know a self-signed certificate): refused.
  r = RunCommand(ctl + "tenants list", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("certificate verify failed"));
  EXPECT_THAT(r.err, HasSubstr("127.0.0.1:" + std::to_string(serve.port())));
  // Plain HTTP on the TLS port gets no answer, and the server keeps serving.
  EXPECT_EQ(HttpCall(serve.port(), "GET", "/healthz").status, 0);
  r = RunCommand(ctl + "--ca-file '" + tls.cert + "' tenants list", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(serve.Kill(SIGTERM), 0);
}

TEST(ServeTls, HalfTheTlsFlagsOrUnusableFilesExit2NamingWhatIsWrong) {
  TempDir dir;
  const TlsFiles tls = MakeSelfSignedCert(dir, "server");
  ASSERT_TRUE(tls.ok()) << tls.error;
  const std::string serve = Binary() + " serve --db '" + dir.File("t.db") + "' --listen 127.0.0.1:0 ";
  CommandResult r = RunCommand(serve + "--tls-cert '" + tls.cert + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tls-cert needs --tls-key"));
  r = RunCommand(serve + "--tls-key '" + tls.key + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tls-key needs --tls-cert"));
  WriteTextFile(dir.File("serve.yaml"), "tls_cert: " + tls.cert + "\n");
  r = RunCommand(serve + "--config '" + dir.File("serve.yaml") + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("tls_key"));
  const std::string missing = dir.File("missing.key");
  r = RunCommand(serve + "--tls-cert '" + tls.cert + "' --tls-key '" + missing + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(missing));
}

TEST(ServeTls, ClientsNameACaFileTheyCannotRead) {
  TempDir dir;
  const std::string missing = dir.File("missing-ca.pem");
  CommandResult r = RunCommand(Binary() + " ctl --server https://127.0.0.1:1 --ca-file '" + missing + "' tenants list", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("CA file '" + missing + "': cannot be read"));
  r = RunCommand(Binary() + " run --server https://127.0.0.1:1 --ca-file '" + missing +
                     "' --token t --tenant a -- true",
                 dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--ca-file: CA file '" + missing + "'"));
}

TEST(ServeTls, TheConfigFileCanTurnTlsOn) {
  TempDir dir;
  const TlsFiles tls = MakeSelfSignedCert(dir, "server");
  ASSERT_TRUE(tls.ok()) << tls.error;
  WriteTextFile(dir.File("serve.yaml"), "tls_cert: " + tls.cert + "\ntls_key: " + tls.key + "\n");
  ServeProcess serve({TESSERA_BINARY, "serve", "--config", dir.File("serve.yaml"), "--db", dir.File("t.db"),
                      "--listen", "127.0.0.1:0"},
                     {std::string("TESSERA_BOOTSTRAP_TOKEN=") + kAdmin});
  ASSERT_TRUE(serve.WaitListening()) << serve.output();
  EXPECT_THAT(serve.output(), HasSubstr("https://"));
  CommandResult r = RunCommand(Binary() + " ctl --server https://localhost:" + std::to_string(serve.port()) +
                                   " --ca-file '" + tls.cert + "' --token " + kAdmin + " tenants list",
                               dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace tessera::testing
