#include "api/origin_check.h"

#include <gtest/gtest.h>

namespace hone::api {
namespace {

TEST(OriginCheck, LoopbackNames) {
  for (const char* h : {"localhost", "127.0.0.1", "127.1.2.3", "::1", "app.localhost"})
    EXPECT_TRUE(IsLoopbackName(h)) << h;
  for (const char* h :
       {"localhost.evil.example", "127.0.0.1.evil.example", "10.0.0.1", "evil.example", "", "127.0.0"})
    EXPECT_FALSE(IsLoopbackName(h)) << h;
  EXPECT_EQ(HostName("LocalHost:8080"), "localhost");
  EXPECT_EQ(HostName("[::1]:8080"), "::1");
  EXPECT_EQ(HostName("::1"), "::1");
}

TEST(OriginCheck, HostOnALoopbackBind) {
  OriginPolicy p;
  EXPECT_FALSE(CheckHost(p, "127.0.0.1:8080"));
  EXPECT_FALSE(CheckHost(p, "localhost"));
  EXPECT_FALSE(CheckHost(p, ""));  // HTTP/1.0
  EXPECT_TRUE(CheckHost(p, "rebind.evil.example:8080"));
  p.allowed_hosts = {"hone.internal"};
  EXPECT_FALSE(CheckHost(p, "HONE.internal:80"));
  p.loopback_bind = false;
  EXPECT_FALSE(CheckHost(p, "anything.example"));
}

TEST(OriginCheck, Origins) {
  OriginPolicy p;
  EXPECT_FALSE(CheckOrigin(p, ""));
  EXPECT_FALSE(CheckOrigin(p, "http://localhost:5173"));
  EXPECT_FALSE(CheckOrigin(p, "http://[::1]:3000"));
  EXPECT_TRUE(CheckOrigin(p, "https://evil.example"));
  EXPECT_TRUE(CheckOrigin(p, "null"));  // sandboxed frames, file:// pages
  EXPECT_TRUE(CheckOrigin(p, "http://localhost.evil.example"));
  p.allowed_origins = {"https://app.example"};
  EXPECT_FALSE(CheckOrigin(p, "https://APP.example"));
  EXPECT_TRUE(CheckOrigin(p, "https://app.example.evil"));
  p.allowed_origins = {"*"};
  EXPECT_FALSE(CheckOrigin(p, "https://evil.example"));
}

}  // namespace
}  // namespace hone::api

namespace hone::api {
namespace {

TEST(SameOrigin, APageOfThisServerNamesTheHostItAsked) {
  EXPECT_TRUE(IsSameOrigin("http://box.example:8080", "box.example:8080"));
  EXPECT_TRUE(IsSameOrigin("https://Box.Example", "box.example"));
  EXPECT_TRUE(IsSameOrigin("http://[::1]:8080", "[::1]:8080"));
  EXPECT_FALSE(IsSameOrigin("http://box.example:8081", "box.example:8080"));
  EXPECT_FALSE(IsSameOrigin("http://evil.example:8080", "box.example:8080"));
  EXPECT_FALSE(IsSameOrigin("null", "box.example:8080"));
  EXPECT_FALSE(IsSameOrigin("file://box.example:8080", "box.example:8080"));
  EXPECT_FALSE(IsSameOrigin("http://box.example:8080", ""));
}

TEST(CorsHeaders, OursAndTheNamesThePreflightAsksForNothingElse) {
  EXPECT_EQ(AllowedCorsHeaders(""), "Authorization, Content-Type, x-api-key, anthropic-version");
  EXPECT_EQ(AllowedCorsHeaders("x-stainless-os, anthropic-dangerous-direct-browser-access"),
            "Authorization, Content-Type, x-api-key, anthropic-version, x-stainless-os, "
            "anthropic-dangerous-direct-browser-access");
  // A value that is not a list of header names cannot inject a header line.
  EXPECT_EQ(AllowedCorsHeaders("x-ok,bad\r\nSet-Cookie: a=b, x:y"),
            "Authorization, Content-Type, x-api-key, anthropic-version, x-ok");
}

}  // namespace
}  // namespace hone::api
