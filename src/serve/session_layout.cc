// How a model's session is laid out for serving: one KV stream for all
// slots or one each (see scheduler.h).
#include "serve/scheduler.h"

namespace hone::serve {

bool UsesSharedKv(const SchedulerOptions& opt) {
  if (opt.slots <= 1 || opt.kv_unified == KvUnified::kOff) return false;
  return opt.kv_unified == KvUnified::kOn;
}

}  // namespace hone::serve
