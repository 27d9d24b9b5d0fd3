#!/usr/bin/env python3
"""flipbyte.py FILE OFFSET [MASK]: XOR the byte at OFFSET of FILE with MASK
(default 1), in place. A negative OFFSET counts from the end. Flipping
it again restores the file."""
import os
import sys

path, off = sys.argv[1], int(sys.argv[2], 0)
mask = int(sys.argv[3], 0) if len(sys.argv) > 3 else 1
fd = os.open(path, os.O_RDWR)
if off < 0:
    off += os.fstat(fd).st_size
b = os.pread(fd, 1, off)
os.pwrite(fd, bytes([b[0] ^ mask]), off)
os.close(fd)
