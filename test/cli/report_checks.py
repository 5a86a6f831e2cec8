#!/usr/bin/env python3
"""Checks shared by the HTML report tests (html_report.sh, calibrate_html.sh).

  report_checks.py self-contained PAGE
      a complete HTML document with no script, link, frame, image source, import or URL (but the SVG
      namespace): it shows the same with no network.
  report_checks.py screenshot PNG --min-non-white FRACTION [--colour NAME:R,G,B:TOLERANCE:MIN_PIXELS ...]
      decodes a headless-browser screenshot (8-bit RGB/RGBA, non-interlaced, as Chromium writes it) with zlib
      and NumPy; enough of it is not white and each named colour covers enough pixels.

Exits 1 with a one-line reason when a check fails; the screenshot check prints what it measured either way.
"""
import argparse
import struct
import sys
import zlib

import numpy as np


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if not (depth == 8 and color in (2, 6) and interlace == 0):
                sys.exit(f"{path}: unexpected PNG format {depth} {color} {interlace}")
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * bpp)
    img = np.zeros((height, width * bpp), dtype=np.int32)
    prev = np.zeros(width * bpp, dtype=np.int32)
    for y in range(height):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:   # Sub: a running sum per channel
            cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) % 256
        elif f == 2:   # Up
            cur = (line + prev) % 256
        else:          # Average / Paeth: sequential
            cur = np.zeros_like(line)
            for x in range(width * bpp):
                a = int(cur[x - bpp]) if x >= bpp else 0
                b, c = int(prev[x]), (int(prev[x - bpp]) if x >= bpp else 0)
                if f == 3:
                    cur[x] = (line[x] + (a + b) // 2) % 256
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                    cur[x] = (line[x] + pred) % 256
        img[y] = cur
        prev = cur
    return img.reshape(height, width, bpp)[:, :, :3]


def check_self_contained(path):
    html = open(path, encoding="utf-8").read()
    if not (html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")):
        sys.exit(f"{path}: not a complete HTML document")
    for banned in ("<script", "<link", " src=", "<iframe", "@import", "url(http"):
        if banned in html:
            sys.exit(f"{path}: not self-contained: contains {banned!r}")
    if html.count("http") != html.count('xmlns="http://www.w3.org/2000/svg"'):
        sys.exit(f"{path}: a URL other than the SVG namespace")


def check_screenshot(args):
    rgb = read_png(args.png)
    height, width = rgb.shape[:2]
    non_white = np.mean(np.any(rgb < 235, axis=2))
    measured = [f"screenshot {width}x{height}: {non_white:.1%} non-white pixels"]
    failures = []
    if non_white <= args.min_non_white:
        failures.append(f"the page is (almost) blank: {non_white:.1%} non-white pixels")
    for spec in args.colour:
        name, colour, tolerance, minimum = spec.split(":")
        target = np.array([int(c) for c in colour.split(",")])
        pixels = int(np.sum(np.all(np.abs(rgb - target) <= int(tolerance), axis=2)))
        measured.append(f"{pixels} {name} pixels")
        if pixels <= int(minimum):
            failures.append(f"{name} ({colour}) covers {pixels} pixels, expected more than {minimum}")
    print(", ".join(measured))
    if failures:
        sys.exit("; ".join(failures))


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    page = commands.add_parser("self-contained")
    page.add_argument("page")
    shot = commands.add_parser("screenshot")
    shot.add_argument("png")
    shot.add_argument("--min-non-white", type=float, required=True)
    shot.add_argument("--colour", action="append", default=[], help="NAME:R,G,B:TOLERANCE:MIN_PIXELS")
    args = parser.parse_args()
    if args.command == "self-contained":
        check_self_contained(args.page)
    else:
        check_screenshot(args)


if __name__ == "__main__":
    main()
