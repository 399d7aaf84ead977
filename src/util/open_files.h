// The open-files limit: each client connection is a file descriptor, and the
// default soft limit (often 1024) would cap a server holding thousands of
// slow or idle connections far below what its memory allows.
#pragma once

#include <cstdint>

namespace hone {

struct OpenFilesLimit {
  uint64_t before = 0;  // the soft limit found
  uint64_t after = 0;   // the soft limit now (the hard limit, when it could be raised)
};

// Raises the soft limit on open files to the hard limit.
OpenFilesLimit RaiseOpenFilesLimit();

}  // namespace hone
