// libFuzzer target: a model file's header, metadata and tensor table as
// ReadGguf reads them before anything is loaded (hone's first line of defence
// against a damaged or hostile file; the parser underneath is ggml's).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // ReadGguf reads a path: an in-memory file keeps the disk out of it.
  static const int fd = memfd_create("fuzz.gguf", 0);
  if (fd < 0) return 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  (void)hone::engine::ReadGguf(path);
  return 0;
}
