# Writes small images in the formats OpenCV reads for us (WebP, TIFF, JPEG 2000), PGM/PPM, and JPEG/PNG/WebP/TIFF
# files carrying an EXIF orientation, each with PIL's decoded pixels beside it (NAME.rgb: "W H\n" then RGB
# bytes; NAME.exif.rgb: after ImageOps.exif_transpose). Run by tests/test_media.cpp with Debian's python3.
#   /usr/bin/python3 tests/pil_images.py OUT_DIR
import sys, os
from PIL import Image, ImageOps
out = sys.argv[1]
w, h = 97, 61
src = Image.merge("RGB", [Image.linear_gradient("L").resize((w, h)),
                          Image.effect_noise((w, h), 60).convert("L"),
                          Image.linear_gradient("L").rotate(90).resize((w, h))])
def dump(name, img):
    with open(os.path.join(out, name + ".rgb"), "wb") as f:
        f.write(b"%d %d\n" % img.size + img.convert("RGB").tobytes())
def save(name, img, **kw):
    img.save(os.path.join(out, name), **kw)
    with Image.open(os.path.join(out, name)) as back:
        dump(name, back.convert("RGB"))
        if kw.get("exif"):
            dump(name + ".exif", ImageOps.exif_transpose(back).convert("RGB"))
save("lossless.webp", src, lossless=True)
save("lossy.webp", src, quality=80)
save("rgba.webp", src.convert("RGBA"), lossless=True)
save("raw.tif", src)
save("lzw.tif", src, compression="tiff_lzw")
save("deflate.tif", src, compression="tiff_adobe_deflate")
save("gray.tif", src.convert("L"))
save("rgba.tif", src.convert("RGBA"))
save("lossless.jp2", src)
for o in range(1, 9):
    ex = Image.Exif(); ex[0x0112] = o
    save("o%d.jpg" % o, src, exif=ex.tobytes(), quality=95)
ex = Image.Exif(); ex[0x0112] = 6
save("o6.png", src, exif=ex.tobytes())
ex = Image.Exif(); ex[0x0112] = 8
save("o8.webp", src, exif=ex.tobytes(), lossless=True)
ex = Image.Exif(); ex[0x0112] = 3
save("o3.tif", src, exif=ex.tobytes())
# Binary PGM/PPM: PIL's own, and hand-written ones with other maxvals (samples above maxval included),
# 16-bit samples and comments inside the header, even inside a number.
save("p6.ppm", src)
save("p5.pgm", src.convert("L"))
save("p5_16.pgm", src.convert("L").point(lambda v: v * 2).convert("I"))
import random
rng = random.Random(7)
def pnm(name, magic, maxval, header=None):
    bands = 3 if magic == "P6" else 1
    top = min(65535, maxval + maxval // 8 + 1) if maxval < 256 else maxval + 20
    width = 1 if top < 256 and maxval < 256 else 2
    top = min(top, 255 if width == 1 else 65535)
    data = b"".join(rng.randint(0, top).to_bytes(width, "big") for _ in range(w * h * bands))
    head = header or ("%s\n%d %d\n%d\n" % (magic, w, h, maxval))
    with open(os.path.join(out, name), "wb") as f:
        f.write(head.encode() + data)
    with Image.open(os.path.join(out, name)) as back:
        dump(name, back.convert("RGB"))
pnm("p6_1000.ppm", "P6", 1000)
pnm("p5_1000.pgm", "P5", 1000)
pnm("p5_15.pgm", "P5", 15)
pnm("p6_100.ppm", "P6", 100)
pnm("p6_comments.ppm", "P6", 255, "P6\n# made by hand\n97 #width\n61\t2#inside maxval\n55\n")
# Paletted BMPs whose pixels index past their palette: PIL gives its default gray ramp (i, i, i) there.
import struct
def bmp(name, bits, palette, indices):
    per_row = (w * bits + 31) // 32 * 4
    rows = b""
    for y in range(h):
        bitsrow = "".join(format(indices[(y * w + x) % len(indices)], "0%db" % bits) for x in range(w))
        bitsrow += "0" * (per_row * 8 - len(bitsrow))
        rows += int(bitsrow, 2).to_bytes(per_row, "big")
    pal = b"".join(bytes((b, g, r, 0)) for r, g, b in palette)
    offset = 14 + 40 + len(pal)
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"BM" + struct.pack("<IHHI", offset + len(rows), 0, 0, offset) +
                struct.pack("<IiiHHIIiiII", 40, w, h, 1, bits, 0, len(rows), 2835, 2835, len(palette), 0) + pal + rows)
    with Image.open(os.path.join(out, name)) as back:
        dump(name, back.convert("RGB"))
bmp("p8_short.bmp", 8, [(255, 0, 0), (0, 255, 0)], list(range(256)))
bmp("p4_short.bmp", 4, [(255, 0, 0), (0, 255, 0), (10, 20, 200)], list(range(16)))
bmp("p1_short.bmp", 1, [(200, 30, 40)], [0, 1, 1])
bmp("p8_full.bmp", 8, [(i, 255 - i, i // 2) for i in range(256)], list(range(256)))
# Animated WebP: PIL gives the first frame (libwebp's animation decoder), opaque and with transparency.
frames = [src, src.rotate(180), src.transpose(Image.FLIP_LEFT_RIGHT)]
save("anim.webp", frames[0], save_all=True, append_images=frames[1:], duration=100, lossless=True)
alpha = src.convert("RGBA")
alpha.putalpha(Image.linear_gradient("L").resize((w, h)))
save("anim_rgba.webp", alpha, save_all=True, append_images=[src.convert("RGBA")], duration=80, quality=70)
# TIFF beyond 8 bits: mode F (32-bit floats, beyond 0..255 and fractional: PIL clips and truncates),
# 16-bit RGB (PIL takes the high byte), 16-bit gray (PIL clips at 255; we take the high byte, as for
# 16-bit PNG: NAME.rgb16 holds that instead), and 3-channel floats, which PIL cannot read.
floats = Image.new("F", (w, h))
floats.putdata([(x * 7.3 - 80.0) + y * 0.37 for y in range(h) for x in range(w)])
save("float.tif", floats)
def tiff(name, bits, bands, fmt, samples):
    """An uncompressed little-endian TIFF: bits per sample, bands, SampleFormat (1 uint, 3 float)."""
    data = b"".join(struct.pack("<" + {(16, 1): "H", (32, 3): "f"}[(bits, fmt)], v) for v in samples)
    entries = [(256, 4, 1, w), (257, 4, 1, h), (258, 3, bands, "bps"), (259, 3, 1, 1), (262, 3, 1, 2 if bands == 3 else 1),
               (273, 4, 1, "data"), (277, 3, 1, bands), (278, 4, 1, h), (279, 4, 1, len(data)), (339, 3, bands, "fmt")]
    ifd_size = 2 + 12 * len(entries) + 4
    extra_at = 8 + ifd_size
    bps, fmts = struct.pack("<%dH" % bands, *[bits] * bands), struct.pack("<%dH" % bands, *[fmt] * bands)
    where = {"bps": extra_at, "fmt": extra_at + len(bps), "data": extra_at + len(bps) + len(fmts)}
    ifd = struct.pack("<H", len(entries))
    for tag, typ, count, value in entries:
        if value in ("bps", "fmt") and bands == 1:
            ifd += struct.pack("<HHIHH", tag, typ, count, bits if value == "bps" else fmt, 0)
        elif isinstance(value, str):
            ifd += struct.pack("<HHII", tag, typ, count, where[value])
        elif typ == 3:
            ifd += struct.pack("<HHIHH", tag, typ, count, value, 0)
        else:
            ifd += struct.pack("<HHII", tag, typ, count, value)
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"II*\0" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0) + bps + fmts + data)
samples16 = [rng.randint(0, 65535) for _ in range(w * h * 3)]
tiff("rgb16.tif", 16, 3, 1, samples16)
with Image.open(os.path.join(out, "rgb16.tif")) as back:
    dump("rgb16.tif", back.convert("RGB"))
gray16 = [rng.randint(0, 65535) for _ in range(w * h)]
tiff("gray16.tif", 16, 1, 1, gray16)
with open(os.path.join(out, "gray16.tif.rgb16"), "wb") as f:
    f.write(b"%d %d\n" % (w, h) + bytes(v >> 8 for v in gray16 for _ in range(3)))
tiff("rgb_float.tif", 32, 3, 3, [rng.uniform(0, 1) for _ in range(w * h * 3)])
