// Where an HTTP/1.1 request ends, read from the bytes received so far: the
// connection gate (connection_gate.h) holds a connection until its request
// is whole and hands it to a worker only then.
//
// It reads only the framing: the end of the header block, Content-Length,
// Transfer-Encoding: chunked (each chunk's size line, the last chunk and the
// trailers) and Expect: 100-continue (the gate then sends "100 Continue"
// itself, or the client would wait for it before its body). Everything else, and every judgement on
// a malformed request, is left to the HTTP parser on the worker: when the
// framing cannot be read, or the request is one to refuse early (a body over
// the limit, a header block over the limit), the verdict is "hand over now",
// and the worker answers 400, 413 or 431 at once from what is already here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hone::api {

class RequestFraming {
 public:
  enum class Verdict {
    kNeedMore,  // wait for more bytes
    kComplete,  // the first request_bytes() bytes are one whole request
    kHandOver,  // give it to a worker as it is (see above): no more waiting
  };
  struct Limits {
    uint64_t max_body = 8u << 20;   // a body declared or received past this: hand over (413)
    size_t max_header = 64u << 10;  // a header block past this: hand over (431/400)
  };

  // `bytes` are all the bytes received for this request so far; each call
  // sees the previous call's bytes and more. Work already done is kept, so a
  // client that drips costs each call only the bytes new to it.
  Verdict Examine(std::string_view bytes, const Limits& limits);

  bool headers_complete() const { return header_end_ > 0; }
  bool expects_continue() const { return expects_continue_; }  // once the headers are complete
  size_t request_bytes() const { return request_end_; }        // after kComplete
  void Reset() { *this = RequestFraming(); }

 private:
  Verdict ReadHeaders(std::string_view bytes, const Limits& limits);
  Verdict ReadChunks(std::string_view bytes, const Limits& limits);

  size_t header_scan_ = 0;      // bytes searched for the header block's end
  size_t header_end_ = 0;       // just past the blank line; 0 until found
  int64_t content_length_ = 0;  // without Transfer-Encoding
  bool chunked_ = false;
  bool expects_continue_ = false;
  size_t chunk_at_ = 0;      // chunked: where the next chunk's size line begins
  size_t trailer_at_ = 0;    // chunked, after the last chunk: where the next trailer line begins
  uint64_t body_bytes_ = 0;  // chunked: data bytes seen so far
  size_t request_end_ = 0;
};

}  // namespace hone::api
