// The console's files and the rules they are served under: the page and its
// scripts load without a key (the page asks for one), never anything else.
#include "api/console.h"

#include <gtest/gtest.h>

#include "api/console_assets.h"
#include "api/request_auth.h"

namespace hone::api {
namespace {

TEST(Console, ServesTheEmbeddedPageWithItsSecurityHeaders) {
  if (!ConsoleBuiltIn()) GTEST_SKIP() << "built with -DHONE_CONSOLE=OFF";
  HttpResponse index = ConsoleFile("/ui/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_NE(index.body.find("<script type=\"module\" src=\"app.js\"></script>"), std::string::npos)
      << index.body;
  EXPECT_EQ(index.headers["Content-Security-Policy"].rfind("default-src 'self'", 0), 0u);
  EXPECT_EQ(index.headers["X-Frame-Options"], "DENY");
  EXPECT_EQ(index.headers["X-Content-Type-Options"], "nosniff");
  HttpResponse js = ConsoleFile("/ui/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_GT(js.body.size(), 10000u);  // Preact, uPlot and the views, minified
  EXPECT_EQ(ConsoleFile("/ui/app.css").status, 200);
}

TEST(Console, RedirectsTheBarePathAndKnowsNoOtherFile) {
  HttpResponse bare = ConsoleFile("/ui");
  EXPECT_EQ(bare.status, 308);
  EXPECT_EQ(bare.headers["Location"], "/ui/");
  EXPECT_EQ(ConsoleFile("/ui/secrets.txt").status, 404);
  EXPECT_EQ(ConsoleFile("/ui/..").status, 404);
  EXPECT_EQ(ConsoleFile("/ui/%2e%2e/etc/passwd").status, 404);
}

TEST(Console, EveryAssetHasAContentTypeAndTheBundleStaysSmall) {
  if (!ConsoleBuiltIn()) GTEST_SKIP() << "built with -DHONE_CONSOLE=OFF";
  size_t total = 0;
  for (const ConsoleAsset& a : ConsoleAssets()) {
    EXPECT_NE(std::string(a.content_type), "") << a.name;
    total += a.size;
  }
  EXPECT_GE(ConsoleAssets().size(), 3u);
  EXPECT_LT(total, 600u * 1024);  // uncompressed; build.mjs holds the gzipped size under 300 KB
}

TEST(Console, ItsFilesLoadWithoutAKeyAndNothingElseDoes) {
  if (!ConsoleBuiltIn()) GTEST_SKIP() << "built with -DHONE_CONSOLE=OFF";
  RequestAuth auth({"sk-1"}, OriginPolicy{});
  auth.SetConsole(true);
  RequestHead head;
  head.method = "GET";
  head.path = "/ui/app.js";
  const Caller nobody = auth.Identify(head);
  EXPECT_FALSE(auth.CheckKey(head, nobody).has_value());
  head.path = "/ui";
  EXPECT_FALSE(auth.CheckKey(head, nobody).has_value());
  head.method = "HEAD";  // what a GET would answer, without the body
  EXPECT_FALSE(auth.CheckKey(head, nobody).has_value());
  head.method = "GET";
  for (const char* path : {"/v1/models", "/hone/routes", "/metrics", "/uix", "/api/ps", "/ui/../v1/models",
                           "/ui/a/app.js", "/ui/missing.js", "/ui/app.js/.."}) {
    head.path = path;
    EXPECT_TRUE(auth.CheckKey(head, nobody).has_value()) << path;
  }
  head.method = "POST";  // no console path takes a POST
  head.path = "/ui/";
  EXPECT_TRUE(auth.CheckKey(head, nobody).has_value());
  // --no-ui: the console's paths are like any other.
  auth.SetConsole(false);
  head.method = "GET";
  EXPECT_TRUE(auth.CheckKey(head, nobody).has_value());
}

TEST(Console, OnAPublicAddressItsOwnOriginIsTakenOnlyBehindKeys) {
  OriginPolicy public_bind;
  public_bind.loopback_bind = false;
  RequestHead post;
  post.method = "POST";
  post.path = "/v1/chat/completions";
  post.host = "box.example:8080";
  post.origin = "http://box.example:8080";
  post.has_origin = true;
  post.content_type = "application/json";
  EXPECT_FALSE(RequestAuth({"sk-1"}, public_bind).CheckBrowser(post).has_value());
  // Without keys a rebinding page would look the same: refused.
  EXPECT_TRUE(RequestAuth({}, public_bind).CheckBrowser(post).has_value());
  post.origin = "http://evil.example:8080";
  EXPECT_TRUE(RequestAuth({"sk-1"}, public_bind).CheckBrowser(post).has_value());
}

}  // namespace
}  // namespace hone::api
