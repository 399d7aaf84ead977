#!/usr/bin/env python3
"""Writes small GGUF files (header, metadata, tensor table, a few bytes of
data) as seeds for the fuzz_gguf_header target: header-only fixtures, not
models. Usage: make_gguf_seeds.py OUT_DIR"""
import os
import struct
import sys

def s(text):
    b = text.encode()
    return struct.pack('<Q', len(b)) + b

def kv(key, vtype, payload):
    return s(key) + struct.pack('<I', vtype) + payload

def gguf(kvs, tensors, version=3, data=b''):
    out = b'GGUF' + struct.pack('<IQQ', version, len(tensors), len(kvs)) + b''.join(kvs)
    for name, dims, ttype, offset in tensors:
        out += s(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        out += struct.pack('<IQ', ttype, offset)
    out += b'\0' * ((32 - len(out) % 32) % 32)
    return out + data

U32, F32, STR, ARR, BOOL, U64 = 4, 6, 8, 9, 7, 10
meta = [kv('general.architecture', STR, s('llama')), kv('llama.context_length', U32, struct.pack('<I', 128)),
        kv('llama.rope.freq_base', F32, struct.pack('<f', 10000.0)), kv('general.flag', BOOL, b'\1'),
        kv('tokenizer.ggml.tokens', ARR, struct.pack('<IQ', STR, 2) + s('a') + s('b')),
        kv('general.size', U64, struct.pack('<Q', 7))]
seeds = {
    'empty_table.gguf': gguf(meta[:1], []),
    'one_f32.gguf': gguf(meta, [('w', [4, 2], 0, 0)], data=b'\0' * 32),
    'two_f16.gguf': gguf(meta, [('a', [8], 1, 0), ('b', [2, 2, 2], 1, 32)], data=b'\0' * 64),
    'truncated.gguf': gguf(meta, [('w', [1024, 1024], 0, 0)], data=b'\0' * 16),
    'v2.gguf': gguf(meta[:3], [('w', [4], 0, 0)], version=2, data=b'\0' * 16),
    'not_gguf.bin': b'GGML' + b'\0' * 60,
}
os.makedirs(sys.argv[1], exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(sys.argv[1], name), 'wb') as f:
        f.write(data)
