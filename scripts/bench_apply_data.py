#!/usr/bin/env python3
"""Writes the keys of `make bench-apply` as RESP commands, one file per master of a 3-master
cluster made by `redis-cli --cluster create` (master i serves the i-th third of the slots):
N keys `key:<i>` of 16 to 1024 random bytes and H keys `{hot}:<i>` of 4 KiB (one hash tag, one
slot), as `make bench-cluster` loads them. Random bytes: DUMP's LZF cannot shrink them, so
bytes and memory agree. Usage: bench_apply_data.py N H SEED OUTDIR."""
import os
import random
import sys


def _crc16_table() -> list:
    # CRC16-CCITT (XMODEM), the hash of Redis Cluster's key slots (cluster spec, "Keys
    # distribution model"), a byte at a time from a table of the 256 bytes' remainders.
    table = []
    for b in range(256):
        crc = b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
        table.append(crc)
    return table


CRC16_TABLE = _crc16_table()


def crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ CRC16_TABLE[(crc >> 8) ^ b]
    return crc


def key_slot(key: bytes) -> int:
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc16(key) % 16384


def owner(slot: int) -> int:
    # redis-cli --cluster create with 3 masters: 0-5460, 5461-10922, 10923-16383.
    return 0 if slot <= 5460 else 1 if slot <= 10922 else 2


def command(key: bytes, value: bytes) -> bytes:
    return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value)


def main() -> None:
    n, hot, seed, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rng = random.Random(seed)
    files = [open(os.path.join(out, f"node{i}.resp"), "wb") for i in range(3)]
    hot_slot = key_slot(b"{hot}")
    for i in range(n):
        key = b"key:%d" % i
        files[owner(key_slot(key))].write(command(key, rng.randbytes(rng.randint(16, 1024))))
    for i in range(hot):
        files[owner(hot_slot)].write(command(b"{hot}:%d" % i, rng.randbytes(4096)))
    for f in files:
        f.close()


main()
