#!/usr/bin/env python3
"""Read a memvisor checkpoint image (docs/image-format.md) independently
of memvisor, for the tests.

  imgcmp.py region IMG PID START END DUMP [--pages N]
      The image's bytes of [START, END) of process PID (hex addresses)
      must equal DUMP, a file of END-START bytes (holes read as zeros):
      a private anonymous page missing from the image is zeros; a private
      file-backed page missing from it is the file's own and not compared;
      a shared region is read through its object. With --pages N, the
      image must hold exactly N pages of the range.
  imgcmp.py pages IMG PID START END
      Print how many pages of [START, END) the image holds.
  imgcmp.py word IMG PID ADDR
      Print the 8-byte little-endian word the image holds at ADDR (hex)
      of process PID, in decimal (0 for a page the image lacks).

Extents of different processes may share bytes of the pages file
(version 3: a page a forked tree shares copy-on-write is stored once);
each is read where its offset says.

The pages it compares must also match their own checksums in the page
checksums that end a version 2 pages file (a sample: pure Python takes a
millisecond a page).

Exit 0 when equal, 1 with the first difference on stderr.
"""
import json
import os
import struct
import sys

PAGE = 4096
HEADER = 4096


def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc_table()


def crc32c(data):
    """CRC32C, bit-reflected, initial and final inversion."""
    c = 0xFFFFFFFF
    t = CRC_TABLE
    for b in data:
        c = (c >> 8) ^ t[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def page_sum(pf, man, off):
    """The stored checksum of the page at pages offset off (version 2)."""
    pf.seek(man["page_sums_offset"] + (off - HEADER) // PAGE * 4)
    return struct.unpack("<I", pf.read(4))[0]


def load(img):
    with open(os.path.join(img, "manifest.json")) as f:
        return json.load(f)


def find_region(man, pid, start):
    for p in man["processes"]:
        if p["pid"] != pid:
            continue
        for r in p["regions"]:
            if int(r["start"], 16) <= start < int(r["end"], 16):
                return r
        sys.exit(f"imgcmp: process {pid} has no region at {start:#x}")
    sys.exit(f"imgcmp: process {pid} is not in the image")


def image_pages(man, r, start, end):
    """{address of a page: offset of its bytes in the pages file}"""
    out = {}
    if r["content"] == "shared":
        obj = man["objects"][r["object"]]
        base = int(r["start"], 16) - r["offset"]  # address of object offset 0
        exts = [(a + base, n, off) for a, n, off, _ in obj["extents"]]
    else:
        exts = [(a, n, off) for a, n, off, _ in r["extents"]]
    for a, n, off in exts:
        for i in range(n):
            addr = a + i * PAGE
            if start <= addr < end:
                out[addr] = off + i * PAGE
    return out


def dump_pages(path, length):
    """Pages of the dump that hold data (SEEK_DATA), as offsets."""
    pages = set()
    with open(path, "rb") as f:
        fd = f.fileno()
        at = 0
        while at < length:
            try:
                data = os.lseek(fd, at, os.SEEK_DATA)
            except OSError:
                break
            hole = os.lseek(fd, data, os.SEEK_HOLE)
            for off in range(data - data % PAGE, min(hole, length), PAGE):
                pages.add(off)
            at = hole
    return pages


def cmd_region(img, pid, start, end, dump, want_pages):
    man = load(img)
    r = find_region(man, pid, start)
    img_pages = image_pages(man, r, start, end)
    if want_pages is not None and len(img_pages) != want_pages:
        sys.exit(f"imgcmp: the image holds {len(img_pages)} pages of {start:#x}-{end:#x}, expected {want_pages}")
    file_backed = r["content"] == "private" and r["inode"] != 0
    zero = bytes(PAGE)
    with open(os.path.join(img, "pages"), "rb") as pf, open(dump, "rb") as df:
        dpages = dump_pages(dump, end - start)
        for off in sorted(dpages | {a - start for a in img_pages}):
            addr = start + off
            if addr not in img_pages and file_backed:
                continue
            df.seek(off)
            d = df.read(PAGE).ljust(PAGE, b"\0")
            if addr in img_pages:
                pf.seek(img_pages[addr])
                i = pf.read(PAGE)
                sample = (addr - start) // PAGE % 61 == 0 or len(img_pages) <= 256
                if man["version"] >= 2 and sample and crc32c(i) != page_sum(pf, man, img_pages[addr]):
                    sys.exit(f"imgcmp: page {addr:#x} does not match its checksum")
            else:
                i = zero
            if i != d:
                where = "in the image" if addr in img_pages else "missing from the image"
                sys.exit(f"imgcmp: page {addr:#x} ({where}) differs from the dump at offset {off:#x}")
    print(f"ok {len(img_pages)} pages")


def cmd_word(img, pid, addr):
    man = load(img)
    r = find_region(man, pid, addr)
    page = addr - addr % PAGE
    pages = image_pages(man, r, page, page + PAGE)
    if page not in pages:
        print(0)
        return
    with open(os.path.join(img, "pages"), "rb") as pf:
        pf.seek(pages[page] + addr % PAGE)
        print(struct.unpack("<Q", pf.read(8))[0])


def main():
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] == "word":
        cmd_word(a[1], int(a[2]), int(a[3], 16))
        return
    if len(a) >= 5 and a[0] == "pages":
        man = load(a[1])
        r = find_region(man, int(a[2]), int(a[3], 16))
        print(len(image_pages(man, r, int(a[3], 16), int(a[4], 16))))
        return
    if len(a) >= 6 and a[0] == "region":
        want = int(a[7]) if len(a) >= 8 and a[6] == "--pages" else None
        cmd_region(a[1], int(a[2]), int(a[3], 16), int(a[4], 16), a[5], want)
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
