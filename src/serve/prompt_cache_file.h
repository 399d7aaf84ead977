// One prompt-cache entry on disk: the KV state of a token prefix, with what
// it belongs to. A file is written whole under a temporary name and renamed,
// so a process killed mid-write leaves a .tmp file (deleted at the next
// start), never a short entry under the real name. The checksum catches the
// rest: a torn or bit-flipped file is a miss, never a wrong answer.
//
// Layout (little-endian, as the machine writes it; a file from another byte
// order fails the magic):
//   "HONEKV\0\1"            8 bytes, format version in the last byte
//   u32 H                   header length
//   H bytes of JSON         {"key", "scope", "tokens", "state_bytes", "created_ms"}
//   i32 tokens[tokens]
//   u8  state[state_bytes]  llama.cpp's sequence state
//   u64 checksum            of every byte before it (PromptCacheChecksum)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace hone::serve {

struct CacheFileHeader {
  std::string key;    // model file hash, llama.cpp commit, KV types, attention layout
  std::string scope;  // who may restore it (a tenant, a salt's hash, or shared)
  std::vector<int32_t> tokens;
  uint64_t state_bytes = 0;
  int64_t created_ms = 0;  // wall clock, for ages after a restart
};

// A fast 64-bit checksum (8 bytes a step); not cryptographic: it detects
// damage, and the folder is the server's own.
uint64_t PromptCacheChecksum(const uint8_t* data, size_t n, uint64_t seed = 0);

// Writes header + state to `path` (via path.tmp and a rename), readable by
// this user only (the tokens are the conversation); never through a symlink.
// Errors: kIo (the message names the path and errno's text: a full disk, a
// read-only folder).
Status WriteCacheFile(const std::string& path, const CacheFileHeader& header,
                      const std::vector<uint8_t>& state);

// Reads the header and tokens only, and checks that the file's size matches
// them. Errors: kCorrupt (bad magic, header, or size), kIo.
Result<CacheFileHeader> ReadCacheFileHeader(const std::string& path);

// Reads the whole file and verifies its checksum and that it still belongs to
// `key`; the header comes back in *header, for the caller to check that the
// file is the entry it expects. Errors: kCorrupt, kIo.
Result<std::vector<uint8_t>> ReadCacheFileState(const std::string& path, const std::string& key,
                                                CacheFileHeader* header);

}  // namespace hone::serve
