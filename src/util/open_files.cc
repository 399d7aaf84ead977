#include "util/open_files.h"

#include <sys/resource.h>

namespace hone {

OpenFilesLimit RaiseOpenFilesLimit() {
  OpenFilesLimit out;
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return out;
  out.before = out.after = l.rlim_cur;
  if (l.rlim_cur >= l.rlim_max) return out;
  rlimit raised = l;
  raised.rlim_cur = l.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) out.after = raised.rlim_cur;
  return out;
}

}  // namespace hone
