#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into corpus/<target>/ (see each target's header
comment for its input format). Seeds are valid inputs: a tenant's life over gRPC, a side-channel
conversation, copies on the copy channel, the example configuration. Inputs the fuzzers found
that once failed are kept as regression-* files (those reproducible from a seed are written
here too)."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GIB2 = 2 << 20


def varint(n):
    out = b""
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    if isinstance(value, (bytes, str)):
        value = value.encode() if isinstance(value, str) else value
        return varint(num << 3 | 2) + varint(len(value)) + value
    return varint(num << 3) + varint(value)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- rpc_fuzzer: u8 call, u8 caller, u16 length, request ---
REGISTER, ALLOCATE, FREE, USAGE, STATUS, LIST, POLICY, PACING, END = range(9)
USER, ROOT, ADMIN, OTHER = range(4)


def call(c, caller, req=b""):
    return struct.pack("<BBH", c, caller, len(req)) + req


register_ls = field(1, 1) + field(2, "web") + field(3, 1)
register_be = field(1, 1) + field(2, "batch") + field(3, 2) + field(4, 4 * GIB2)
alloc = lambda s, n, shape=1: field(1, s) + field(2, 0) + field(3, shape) + field(4, n * GIB2)
write("rpc_fuzzer", "tenant-life", call(REGISTER, USER, register_ls) +
      call(ALLOCATE, USER, alloc(0, 4)) + call(ALLOCATE, USER, alloc(0, 2, 2)) +
      call(USAGE, USER, field(1, 0)) + call(FREE, USER, field(1, 0) + field(3, 0) + field(3, 1)) +
      call(STATUS, USER) + call(LIST, USER) + call(END, USER))
write("rpc_fuzzer", "two-tenants-over-quota", call(REGISTER, USER, register_ls) +
      call(REGISTER, OTHER, register_be) + call(ALLOCATE, USER, alloc(0, 8)) +
      call(ALLOCATE, USER, alloc(0, 2)) + call(ALLOCATE, OTHER, alloc(1, 4)) +
      call(FREE, OTHER, field(1, 1) + field(3, 0)) + call(LIST, ROOT))
write("rpc_fuzzer", "admin-policy", call(REGISTER, USER, register_be) +
      call(POLICY, USER, field(2, "batch") + field(5, -5 & (2**64 - 1))) +
      call(POLICY, ROOT, field(2, "batch") + field(4, 1) + field(6, 4096)) +
      call(POLICY, ADMIN, field(3, 2) + field(7, 2 * GIB2) + field(8, 8 * GIB2)) +
      call(PACING, ROOT, field(1, 1) + field(2, 16) + field(3, 50000)) +
      call(PACING, USER, field(2, 0)) + call(STATUS, USER))
write("rpc_fuzzer", "bad-requests", call(REGISTER, USER, field(1, 2) + field(2, "x")) +
      call(REGISTER, USER, field(1, 1) + field(2, "bad name!") + field(3, 1)) +
      call(ALLOCATE, USER, field(1, 7) + field(3, 9) + field(4, 1)) +
      call(FREE, USER, field(1, 7)) + call(POLICY, ROOT, field(6, 0)))

# --- side_channel_fuzzer: flags, then the connection's bytes ---
MAGIC, VERSION = 0x4D534C31, 2


def fetch_n(op, gpu, count, ids):
    ids = list(ids) + [0] * (128 - len(ids))
    return struct.pack("<IIII", op, gpu, count, 0) + struct.pack("<128Q", *ids)


write("side_channel_fuzzer", "fetch-blocks", bytes([3]) + fetch_n(1, 0, 2, [0, 1]) +
      fetch_n(1, 0, 4, [0, 1, 2, 3]))
write("side_channel_fuzzer", "open-channels", bytes([1]) + fetch_n(2, 0, 0, []) +
      fetch_n(3, 0, 0, []) + fetch_n(2, 0, 0, []))
write("side_channel_fuzzer", "bad-requests", bytes([3]) + fetch_n(1, 0, 0, []) +
      fetch_n(1, 0, 129, []) + fetch_n(1, 5, 1, [0]) + fetch_n(9, 0, 0, []) + b"\x01\x02")
# A refused hello closed the connection and then read it (use after free).
write("side_channel_fuzzer", "regression-refused-hello-use-after-free", bytes([0]) +
      struct.pack("<IIQ", MAGIC, 1, 1) + bytes(16))
write("side_channel_fuzzer", "forged-hello", bytes([0]) +
      struct.pack("<IIQ", MAGIC, VERSION, 12345) + bytes(16) + fetch_n(2, 0, 0, []))
write("side_channel_fuzzer", "receiver", bytes([4]) +
      struct.pack("<BBH", 2, 8, 8) + struct.pack("<II", 0, 2) +
      struct.pack("<BBH", 0, 3, 5) + b"abcde" + struct.pack("<BBH", 3, 0, 1) + b"z")

# --- copy_channel_fuzzer: op byte (bit 7: tenant, bit 4: direction, low: op % 10) + args ---
LS, BE = 0x00, 0x80


def post(t, d, nbytes, chunk_pick, first):
    return bytes([t | d << 4 | 0]) + struct.pack("<IBH", nbytes, chunk_pick, first)


def arrive(t, d, gate):
    return bytes([t | d << 4 | 1]) + struct.pack("<H", gate)


POLL = bytes([9])
DONE_ALL = lambda t, d: bytes([t | d << 4 | 3])
write("copy_channel_fuzzer", "ls-and-be-copies",
      post(LS, 0, 4 * GIB2, 0, 0) + arrive(LS, 0, 0) + post(BE, 1, 8 * GIB2, 0, 10) +
      arrive(BE, 1, 10) + POLL + DONE_ALL(LS, 0) + DONE_ALL(BE, 1) + POLL + POLL +
      DONE_ALL(LS, 0) + DONE_ALL(BE, 1) + POLL + bytes([7]) + POLL)
write("copy_channel_fuzzer", "large-chunks",
      post(BE, 0, 32 * GIB2, 1, 4090) + arrive(BE, 0, 4090) + POLL + DONE_ALL(BE, 0) + POLL +
      bytes([0x80 | 6]) + struct.pack("<H", 200) + POLL)
write("copy_channel_fuzzer", "malformed",
      post(LS, 0, 0, 0, 0) + POLL + post(BE, 0, 4 * GIB2, 3, 5000) + POLL +
      bytes([0x80 | 5]) + struct.pack("<Q", 2**63) + POLL + bytes([0x28]) + POLL)

# --- config_fuzzer: TOML text ---
with open(os.path.join(HERE, "..", "..", "deploy", "missiled.toml"), "rb") as f:
    write("config_fuzzer", "example", f.read())
write("config_fuzzer", "empty", b"")
write("config_fuzzer", "small", b'[daemon]\nlog_level = "debug"\n[gpu]\npool_limit = "90%"\n'
      b'[pcie]\nchunk = "2MiB"\nls_first = false\n[classes.be]\npriority = 5\n')
write("config_fuzzer", "bad", b'[gpu]\npool_limit = 95\n[pcie\nchunk = -1\n')

# --- pacing_region_fuzzer: tenants write words of their lanes pages; op byte, tenant byte, args ---
def scribble(tenant, word, value):
    return bytes([0, tenant]) + struct.pack("<HQ", word, value)


PUBLISH, STATS = bytes([1, 0]), bytes([2, 0])
READ_NOW = bytes([3, 0, 0])
READ_AT = lambda t: bytes([3, 0, 1]) + struct.pack("<Q", t)
# Words of a lanes page: 1 last_submit_ns, 2 held_ns, 4 hold_since_ns, 5 inflight, 6 gpu_ns,
# 8 running_until_ns, 9 active | lanes_used << 32, 16.. the lanes (4 words each).
write("pacing_region_fuzzer", "busy-ls-and-be",
      PUBLISH + scribble(0, 9, 1 << 32) + scribble(0, 16, 5) + scribble(0, 1, 1) + READ_NOW +
      scribble(1, 6, 1000) + scribble(1, 9, 1 | 1 << 32) + READ_NOW + STATS)
write("pacing_region_fuzzer", "lies",
      PUBLISH + scribble(0, 1, 2**64 - 1) + scribble(0, 9, 2**64 - 1) + scribble(1, 6, 2**64 - 1) +
      scribble(1, 8, 2**64 - 1) + scribble(1, 4, 2**64 - 1) + scribble(1, 2, 2**64 - 1) +
      READ_AT(0) + READ_AT(2**64 - 1) + READ_NOW + STATS)
write("pacing_region_fuzzer", "churn",
      PUBLISH + bytes([4, 1, 0]) + PUBLISH + bytes([5, 2, 1, 7]) + bytes([4, 3, 1]) + PUBLISH +
      STATS + READ_NOW)
sys.exit(0)
