// The gate's reading of where a request ends, fed whole and byte by byte.
#include "api/request_framing.h"

#include <gtest/gtest.h>

#include <string>

namespace hone::api {
namespace {

using Verdict = RequestFraming::Verdict;

// Feeds `wire` one byte at a time; returns the first verdict that is not
// kNeedMore and how many bytes it took (or kNeedMore and the whole size).
std::pair<Verdict, size_t> Drip(const std::string& wire, RequestFraming::Limits limits = {}) {
  RequestFraming f;
  for (size_t n = 1; n <= wire.size(); ++n) {
    const Verdict v = f.Examine(std::string_view(wire).substr(0, n), limits);
    if (v != Verdict::kNeedMore) return {v, v == Verdict::kComplete ? f.request_bytes() : n};
  }
  return {Verdict::kNeedMore, wire.size()};
}

TEST(RequestFraming, AGetIsWholeAtTheBlankLine) {
  const std::string get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(Drip(get), std::make_pair(Verdict::kComplete, get.size()));
  EXPECT_EQ(Drip("GET /health HTTP/1.1\r\nHost: x\r\n").first, Verdict::kNeedMore);
  // Bare line feeds end no line for the parser (built without
  // CPPHTTPLIB_ALLOW_LF_AS_LINE_TERMINATOR): the gate must not call it whole
  // either, or the parser would wait on a worker for the rest.
  EXPECT_EQ(Drip("GET / HTTP/1.1\nHost: x\n\n").first, Verdict::kNeedMore);
}

TEST(RequestFraming, ABodyByContentLengthAndNotTheNextRequest) {
  const std::string post =
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 11\r\n\r\n{\"a\": true}";
  EXPECT_EQ(Drip(post), std::make_pair(Verdict::kComplete, post.size()));
  EXPECT_EQ(Drip(post.substr(0, post.size() - 1)).first, Verdict::kNeedMore);
  // Pipelined: the first request ends where its body does.
  RequestFraming f;
  EXPECT_EQ(f.Examine(post + "GET / HTTP/1.1\r\n\r\n", {}), Verdict::kComplete);
  EXPECT_EQ(f.request_bytes(), post.size());
}

TEST(RequestFraming, ChunkedBodiesEndAfterTheLastChunkAndTrailers) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n";
  EXPECT_EQ(Drip(head + body), std::make_pair(Verdict::kComplete, head.size() + body.size()));
  const std::string trailers = "5\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n";
  EXPECT_EQ(Drip(head + trailers), std::make_pair(Verdict::kComplete, head.size() + trailers.size()));
  EXPECT_EQ(Drip(head + "5\r\nhello\r\n0\r\n").first, Verdict::kNeedMore);
  // A chunk's data not followed by CRLF, or a size that is not hex: the parser's to refuse.
  EXPECT_EQ(Drip(head + "5\r\nhelloXX0\r\n\r\n").first, Verdict::kHandOver);
  EXPECT_EQ(Drip(head + "zz\r\n").first, Verdict::kHandOver);
  EXPECT_EQ(Drip(head + "5\nhello\r\n").first, Verdict::kHandOver);  // a bare LF after the size
  // Chunk extensions and trailers are bounded on the wire, not only the data.
  RequestFraming::Limits small;
  small.max_body = 100;
  small.max_header = 200;
  EXPECT_EQ(Drip(head + "1;" + std::string(2000, 'x') + "\r\na\r\n", small).first, Verdict::kHandOver);
  std::string trailers_forever = head + "0\r\n";
  for (int i = 0; i < 100; ++i) trailers_forever += "a: b\r\n";
  EXPECT_EQ(Drip(trailers_forever, small).first, Verdict::kHandOver);
}

TEST(RequestFraming, WhatTheWorkerMustRefuseIsHandedOverAtOnce) {
  RequestFraming::Limits small;
  small.max_body = 100;
  small.max_header = 200;
  // A declared body over the limit: at the end of the headers, not after the body (a 413).
  const std::string big = "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n";
  EXPECT_EQ(Drip(big, small), std::make_pair(Verdict::kHandOver, big.size()));
  // A chunked body that grows past it.
  const std::string chunk = std::string("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") + "40\r\n" +
                            std::string(64, 'a') + "\r\n40\r\n";
  EXPECT_EQ(Drip(chunk, small).first, Verdict::kHandOver);
  // A header block past its limit, ended or not (431/400).
  EXPECT_EQ(Drip("GET / HTTP/1.1\r\nX: " + std::string(300, 'a'), small).first, Verdict::kHandOver);
  // Framing the parser refuses (400): a bad or conflicting length, both framings, another coding.
  EXPECT_EQ(Drip("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n").first, Verdict::kHandOver);
  EXPECT_EQ(Drip("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").first,
            Verdict::kHandOver);
  EXPECT_EQ(Drip("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n").first,
            Verdict::kHandOver);
  EXPECT_EQ(Drip("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").first, Verdict::kHandOver);
}

TEST(RequestFraming, Expect100ContinueIsNotedAndTheBodyAwaited) {
  RequestFraming f;
  const std::string head = "POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n";
  EXPECT_EQ(f.Examine(head, {}), Verdict::kNeedMore);
  EXPECT_TRUE(f.expects_continue());
  EXPECT_EQ(f.Examine(head + "hello", {}), Verdict::kComplete);
  // Ignored in HTTP/1.0, as the parser ignores it.
  RequestFraming old;
  EXPECT_EQ(old.Examine("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", {}),
            Verdict::kNeedMore);
  EXPECT_FALSE(old.expects_continue());
  RequestFraming plain;
  EXPECT_EQ(plain.Examine("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", {}), Verdict::kNeedMore);
  EXPECT_FALSE(plain.expects_continue());
}

TEST(RequestFraming, ResetReadsTheNextRequest) {
  RequestFraming f;
  const std::string first = "GET /a HTTP/1.1\r\n\r\n";
  ASSERT_EQ(f.Examine(first, {}), Verdict::kComplete);
  f.Reset();
  EXPECT_FALSE(f.headers_complete());
  EXPECT_EQ(f.Examine("POST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\n", {}), Verdict::kNeedMore);
  EXPECT_TRUE(f.headers_complete());
}

}  // namespace
}  // namespace hone::api
