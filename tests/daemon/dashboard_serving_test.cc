// The dashboard's files under /ui: StaticBundle (content types, caching headers, no way out of
// its folder), the router's "{name...}" rest parameter, and the control plane's /ui routes with
// and without a bundle, the last over a real socket as a browser sends its requests.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "src/daemon/http_server.h"
#include "src/daemon/static_bundle.h"
#include "tessera/daemon/control_plane.h"

namespace tessera::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

class DashboardFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tessera-ui-test-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    Write(root_ / "ui/index.html", "<!doctype html><title>tessera</title>");
    Write(root_ / "ui/assets/app-1a2b.js", "console.log(1)");
    Write(root_ / "ui/assets/app-1a2b.css", "body{}");
    Write(root_ / "secret.txt", "outside the bundle");
    fs::create_symlink(root_ / "secret.txt", root_ / "ui/link.txt");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(DashboardFiles, ServesEachFileWithItsContentTypeAndCachePolicy) {
  StatusOr<StaticBundle> b = StaticBundle::Load((root_ / "ui").string());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->files(), 3u);  // index.html and two assets; the symbolic link is skipped
  const HttpResponse index = b->Serve("");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(index.body, "<!doctype html><title>tessera</title>");
  EXPECT_EQ(Header(index, "Cache-Control"), "no-cache");
  EXPECT_THAT(Header(index, "Content-Security-Policy"), HasSubstr("default-src 'self'"));
  EXPECT_EQ(b->Serve("index.html").body, index.body);
  const HttpResponse js = b->Serve("assets/app-1a2b.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(Header(js, "Cache-Control"), "public, max-age=31536000, immutable");
  EXPECT_EQ(Header(js, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(b->Serve("assets/app-1a2b.css").content_type, "text/css; charset=utf-8");
}

TEST_F(DashboardFiles, NoPathReachesAFileOutsideTheFolder) {
  StatusOr<StaticBundle> b = StaticBundle::Load((root_ / "ui").string());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  for (const char* path : {"../secret.txt", "assets/../../secret.txt", "./index.html", "assets/./app-1a2b.js",
                           "/etc/passwd", "link.txt", "assets", "assets/", "..\\secret.txt", "missing.js"}) {
    const HttpResponse r = b->Serve(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_THAT(r.body, Not(HasSubstr("outside the bundle"))) << path;
  }
}

TEST_F(DashboardFiles, AFolderWithoutIndexIsRefusedNamingIt) {
  fs::remove(root_ / "ui/index.html");
  StatusOr<StaticBundle> b = StaticBundle::Load((root_ / "ui").string());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), HasSubstr((root_ / "ui").string() + "': no index.html"));
  EXPECT_THAT(StaticBundle::Load((root_ / "nothing").string()).status().message(), HasSubstr("not a folder"));
}

TEST(ContentTypeForPath, ByExtension) {
  EXPECT_EQ(ContentTypeForPath("a/b.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeForPath("x.json"), "application/json");
  EXPECT_EQ(ContentTypeForPath(".js"), "application/octet-stream");  // a name, not an extension
  EXPECT_EQ(ContentTypeForPath("README"), "application/octet-stream");
}

TEST(RestParameter, TakesTheRestOfThePathDecodedSegmentBySegment) {
  HttpServer server({});
  ASSERT_TRUE(server.Route("GET", "/ui/{file...}", [](const HttpRequest& r) {
    return HttpResponse::Json(200, "[" + r.path_params.at("file") + "]");
  }).ok());
  auto get = [&](const std::string& raw) {
    HttpRequest r;
    r.method = "GET";
    r.raw_path = raw;
    r.path = PercentDecode(raw);
    return server.Handle(r);
  };
  EXPECT_EQ(get("/ui/assets/app.js").body, "[assets/app.js]");
  EXPECT_EQ(get("/ui/").body, "[]");
  EXPECT_EQ(get("/ui/a%20b/c").body, "[a b/c]");
  EXPECT_EQ(get("/ui").status, 404);
  EXPECT_EQ(get("/other/x").status, 404);
  EXPECT_FALSE(server.Route("GET", "/ui/{file...}/x", nullptr).ok());
  EXPECT_FALSE(server.Route("GET", "/ui/{...}", nullptr).ok());
}

// One request over a socket; the whole answer (the server closes after it: Connection: close).
std::string RawGet(uint16_t port, const std::string& target) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return "";
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  (void)!send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

class DashboardRoutes : public DashboardFiles {
 protected:
  std::unique_ptr<ControlPlane> Start(const std::string& ui_dir) {
    ControlPlaneOptions o;
    o.db = "sqlite:" + (root_ / "tessera.db").string();
    o.listen_port = 0;
    o.bootstrap_token = "admin-token-for-the-tests-0001";
    o.run_loop = false;
    o.ui_dir = ui_dir;
    auto cp = ControlPlane::Create(std::move(o));
    EXPECT_TRUE(cp.ok()) << cp.status().ToString();
    if (!cp.ok()) return nullptr;
    EXPECT_TRUE((*cp)->Start().ok());
    return std::move(*cp);
  }
};

TEST_F(DashboardRoutes, ServesTheBundleWithoutATokenAndNothingOutsideIt) {
  std::unique_ptr<ControlPlane> cp = Start((root_ / "ui").string());
  ASSERT_TRUE(cp);
  const std::string index = RawGet(cp->port(), "/ui/");
  EXPECT_THAT(index, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(index, HasSubstr("Content-Type: text/html; charset=utf-8"));
  EXPECT_THAT(index, HasSubstr("<title>tessera</title>"));
  const std::string redirect = RawGet(cp->port(), "/ui");
  EXPECT_THAT(redirect, HasSubstr("HTTP/1.1 308"));
  EXPECT_THAT(redirect, HasSubstr("Location: /ui/"));
  EXPECT_THAT(RawGet(cp->port(), "/ui/assets/app-1a2b.js"), HasSubstr("Content-Type: text/javascript"));
  for (const char* target : {"/ui/../secret.txt", "/ui/%2e%2e/secret.txt", "/ui/assets/%2E%2E/%2E%2E/secret.txt",
                             "/ui/assets%2F..%2F..%2Fsecret.txt", "/ui/..%5Csecret.txt", "/ui/link.txt"}) {
    const std::string r = RawGet(cp->port(), target);
    EXPECT_THAT(r, HasSubstr("HTTP/1.1 404")) << target;
    EXPECT_THAT(r, Not(HasSubstr("outside the bundle"))) << target;
  }
  // The API still wants its token.
  EXPECT_THAT(RawGet(cp->port(), "/v1/tenants"), HasSubstr("HTTP/1.1 401"));
}

TEST_F(DashboardRoutes, WithoutABundleUiSaysHowToGetOne) {
  std::unique_ptr<ControlPlane> cp = Start("");
  ASSERT_TRUE(cp);
  for (const char* target : {"/ui", "/ui/", "/ui/assets/app.js"}) {
    const std::string r = RawGet(cp->port(), target);
    EXPECT_THAT(r, HasSubstr("HTTP/1.1 404")) << target;
    EXPECT_THAT(r, HasSubstr("\"no_dashboard\"")) << target;
    EXPECT_THAT(r, HasSubstr("--ui-dir")) << target;
  }
}

TEST_F(DashboardRoutes, ABadUiDirFailsTheStartNamingIt) {
  ControlPlaneOptions o;
  o.db = "sqlite:" + (root_ / "tessera.db").string();
  o.bootstrap_token = "admin-token-for-the-tests-0001";
  o.run_loop = false;
  o.ui_dir = (root_ / "assets-only").string();
  auto cp = ControlPlane::Create(std::move(o));
  ASSERT_FALSE(cp.ok());
  EXPECT_EQ(cp.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(cp.status().message(), HasSubstr("--ui-dir (ui_dir): dashboard folder '"));
  EXPECT_THAT(cp.status().message(), HasSubstr("assets-only': not a folder"));
}

}  // namespace
}  // namespace tessera::daemon
