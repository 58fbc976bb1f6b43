#!/usr/bin/env python3
"""Renders `lockstep explain --html` in headless Chromium (Debian's `chromium`): no console
error in Chromium's own log (--enable-logging=stderr), the serialised DOM holds one SVG chart per
stage plus the histogram of draws, and a screenshot is not blank (the PNG is decoded here with
zlib and struct and its non-white pixels counted). Skips when chromium is not installed.

usage: explain_html_test.py PATH/TO/lockstep"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

LOCKSTEP = None


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chrome_args(profile):
    return ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", "--disable-background-networking", "--disable-sync",
            "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0"]


def decode_png(data):
    """Returns (width, height, rows of RGB tuples) for 8-bit RGB/RGBA non-interlaced PNGs."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        prev = line
    return width, height, rows


@unittest.skipIf(chromium() is None, "chromium is not installed (scripts/install-deps.sh)")
class ExplainHtml(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lockstep-explain-")
        cls.html = os.path.join(cls.dir, "explain.html")
        p = subprocess.run([LOCKSTEP, "explain", "--logits", "6,5,4.5,3.5,2,0", "--labels",
                            "mat,sofa,floor,bed,moon,banana", "--history", "mat",
                            "--repetition-penalty", "1.25", "--top-k", "5", "--top-p", "0.9",
                            "--min-p", "0.1", "--samples", "5000", "--html", cls.html],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        cls.url = "file://" + cls.html

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_self_contained(self):
        with open(self.html, encoding="utf-8") as f:
            page = f.read()
        self.assertNotIn("http://", page.replace("http://www.w3.org/2000/svg", ""))
        self.assertNotIn("https://", page)
        self.assertNotIn("<script", page)
        self.assertNotIn("@import", page)

    def test_dom_has_the_charts_and_no_console_error(self):
        profile = tempfile.mkdtemp(dir=self.dir)
        p = subprocess.run([chromium(), *chrome_args(profile), "--dump-dom", self.url],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        dom = p.stdout
        self.assertEqual(dom.count("<svg"), 11)  # 10 stages + the draws
        for stage in ("repetition", "top_p", "min_p", "final", "draws"):
            self.assertIn('aria-label="%s"' % stage, dom)
        self.assertIn("cut-off", dom)
        self.assertIn("kept mass", dom)
        for line in p.stderr.splitlines():
            self.assertNotRegex(line, r"Uncaught|CONSOLE\(|console.*(error|Error)|"
                                      r"Failed to load|ERR_", line)

    def test_screenshot_not_blank(self):
        profile = tempfile.mkdtemp(dir=self.dir)
        png = os.path.join(self.dir, "shot.png")
        p = subprocess.run([chromium(), *chrome_args(profile), "--screenshot=" + png,
                            "--window-size=800,1200", "--hide-scrollbars", self.url],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        for line in p.stderr.splitlines():
            self.assertNotRegex(line, r"Uncaught|CONSOLE\(", line)
        with open(png, "rb") as f:
            width, height, rows = decode_png(f.read())
        self.assertEqual((width, height), (800, 1200))
        ink = sum(1 for row in rows for px in row if px != (255, 255, 255))
        blue = sum(1 for row in rows for (r, g, b) in row if b > 150 and r < 100)
        self.assertGreater(ink, width * height // 100, "the screenshot is (nearly) blank")
        self.assertGreater(blue, 1000, "no bars drawn")


if __name__ == "__main__":
    LOCKSTEP = sys.argv.pop(1)
    unittest.main()
