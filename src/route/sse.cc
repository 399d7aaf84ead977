#include "route/sse.h"

namespace hone::route {

std::vector<SseEvent> SseParser::Feed(const std::string& bytes) {
  std::vector<SseEvent> out;
  for (char ch : bytes) {
    if (ch != '\n') {
      line_ += ch;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {  // blank line: dispatch
      if (has_data_) {
        if (data_ == "[DONE]") {
          done_ = true;
        } else {
          out.push_back({event_, data_});
        }
      }
      data_.clear();
      event_.clear();
      has_data_ = false;
    } else if (line_[0] != ':') {  // ':' starts a comment (keep-alive)
      size_t colon = line_.find(':');
      std::string field = line_.substr(0, colon);
      std::string value = colon == std::string::npos ? "" : line_.substr(colon + 1);
      if (!value.empty() && value[0] == ' ') value.erase(0, 1);
      if (field == "data") {
        if (has_data_) data_ += '\n';
        data_ += value;
        has_data_ = true;
      } else if (field == "event") {
        event_ = value;
      }
    }
    line_.clear();
  }
  return out;
}

}  // namespace hone::route
