// Server-sent events as OpenAI-compatible APIs stream them: "data: {...}"
// lines, events separated by a blank line, "data: [DONE]" at the end.
// Incremental: bytes go in as they arrive, complete events come out.
#pragma once

#include <string>
#include <vector>

namespace hone::route {

struct SseEvent {
  std::string event;  // the "event:" field, usually empty
  std::string data;   // "data:" lines joined with '\n'
};

class SseParser {
 public:
  // Appends bytes; returns the events they completed.
  std::vector<SseEvent> Feed(const std::string& bytes);
  bool done() const { return done_; }  // "[DONE]" was seen
  size_t buffered() const { return line_.size() + data_.size(); }

 private:
  std::string line_;  // a line not yet ended
  std::string data_, event_;
  bool has_data_ = false;
  bool done_ = false;
};

}  // namespace hone::route
