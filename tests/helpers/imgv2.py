#!/usr/bin/env python3
"""Rewrite an image of format version 3 in which no two extents share
bytes as the same image in version 2 (docs/image-format.md: the versions
differ only in that rule), for the tests that older images are still
read: the manifest's "version", the pages header's version, the
manifest's size and CRC32C in the header, and the header's own CRC32C.

  imgv2.py IMG
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imgcmp import crc32c  # noqa: E402

img = sys.argv[1]
man_path, pages_path = os.path.join(img, "manifest.json"), os.path.join(img, "pages")
text = open(man_path, "rb").read()
man = json.loads(text)
if man["version"] != 3:
    sys.exit("not a version 3 image")
new = text.replace(b'"version":3', b'"version":2', 1)
if new == text:
    sys.exit("no \"version\":3 in the manifest")
with open(man_path, "wb") as f:
    f.write(new)
with open(pages_path, "r+b") as f:
    h = bytearray(f.read(4096))
    struct.pack_into("<I", h, 8, 2)
    struct.pack_into("<Q", h, 64, len(new))
    struct.pack_into("<I", h, 72, crc32c(new))
    struct.pack_into("<I", h, 80, 0)
    struct.pack_into("<I", h, 80, crc32c(bytes(h)))
    f.seek(0)
    f.write(h)
