// Finding the EXIF orientation in JPEG, PNG, WebP and TIFF files and turning the pixels; see orientation.h.
// Every offset is checked against the bytes at hand: these parsers see whatever a file holds.
#include "engine/image/orientation.h"

#include <cstring>

namespace vit {
namespace {

// Orientation from an EXIF block: a TIFF header and its first directory (IFD0), optionally after
// "Exif\0\0". PIL reads tag 0x0112 there; a value it would not act on (count other than 1, out of
// 1..8) counts as none.
int orientation_from_exif(const uint8_t* d, size_t n) {
  if (n >= 6 && std::memcmp(d, "Exif\0\0", 6) == 0) {
    d += 6;
    n -= 6;
  }
  if (n < 8) return 1;
  const bool le = d[0] == 'I' && d[1] == 'I';
  if (!le && !(d[0] == 'M' && d[1] == 'M')) return 1;
  const auto u16 = [&](size_t i) { return le ? uint32_t(d[i] | d[i + 1] << 8) : uint32_t(d[i] << 8 | d[i + 1]); };
  const auto u32 = [&](size_t i) { return le ? u16(i) | u16(i + 2) << 16 : u16(i) << 16 | u16(i + 2); };
  if (u16(2) != 42) return 1;
  const uint64_t ifd = u32(4);
  if (ifd + 2 > n) return 1;
  int orientation = 1;
  for (uint64_t k = 0, count = u16(size_t(ifd)); k < count; ++k) {
    const uint64_t e = ifd + 2 + 12 * k;
    if (e + 12 > n) break;
    if (u16(size_t(e)) != 0x0112 || u32(size_t(e) + 4) != 1) continue;
    const uint32_t type = u16(size_t(e) + 2);
    const uint32_t v = type == 3 ? u16(size_t(e) + 8) : type == 4 ? u32(size_t(e) + 8) : 0;
    orientation = v >= 1 && v <= 8 ? int(v) : 1;  // a repeated tag: the last one, as PIL's dict keeps it
  }
  return orientation;
}

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
uint32_t le32(const uint8_t* p) { return uint32_t(p[3]) << 24 | uint32_t(p[2]) << 16 | uint32_t(p[1]) << 8 | p[0]; }

// JPEG: the first APP1 segment holding "Exif\0\0" (PIL keeps the first), before the scan starts.
int jpeg_orientation(const uint8_t* d, size_t n) {
  size_t i = 2;
  while (i + 4 <= n && d[i] == 0xFF) {
    const uint8_t marker = d[i + 1];
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) break;  // start of scan, end of image
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {  // markers without a length
      i += 2;
      continue;
    }
    const size_t len = size_t(d[i + 2]) << 8 | d[i + 3];
    if (len < 2 || i + 2 + len > n) break;
    if (marker == 0xE1 && len - 2 >= 6 && std::memcmp(d + i + 4, "Exif\0\0", 6) == 0)
      return orientation_from_exif(d + i + 4, len - 2);
    i += 2 + len;
  }
  return 1;
}

// PNG: the eXIf chunk, wherever it is (PIL also reads the chunks after the image data for it).
int png_orientation(const uint8_t* d, size_t n) {
  for (size_t i = 8; i + 12 <= n;) {
    const size_t len = be32(d + i);
    if (len > n - i - 12) break;
    if (std::memcmp(d + i + 4, "eXIf", 4) == 0) return orientation_from_exif(d + i + 8, len);
    if (std::memcmp(d + i + 4, "IEND", 4) == 0) break;
    i += 12 + len;
  }
  return 1;
}

// WebP: the EXIF chunk of the RIFF container (chunks padded to even lengths).
int webp_orientation(const uint8_t* d, size_t n) {
  for (size_t i = 12; i + 8 <= n;) {
    const size_t len = le32(d + i + 4);
    if (len > n - i - 8) break;
    if (std::memcmp(d + i, "EXIF", 4) == 0) return orientation_from_exif(d + i + 8, len);
    i += 8 + len + (len & 1);
  }
  return 1;
}

}  // namespace

int exif_orientation(const uint8_t* d, size_t n, ImageFormat format) {
  switch (format) {
    case ImageFormat::Jpeg: return jpeg_orientation(d, n);
    case ImageFormat::Png: return png_orientation(d, n);
    case ImageFormat::WebP: return webp_orientation(d, n);
    case ImageFormat::Tiff: return orientation_from_exif(d, n);  // a TIFF is an EXIF block itself
    default: return 1;
  }
}

Image apply_orientation(const Image& img, int orientation) {
  if (orientation < 2 || orientation > 8) return img;
  const int w = img.width, h = img.height;
  const bool swap = orientation >= 5;  // the quarter turns and the transpositions exchange the sides
  Image out;
  out.width = swap ? h : w;
  out.height = swap ? w : h;
  out.rgb.resize(img.rgb.size());
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;  // the source of output pixel (x, y)
      switch (orientation) {
        case 2: sx = w - 1 - x; break;
        case 3: sx = w - 1 - x; sy = h - 1 - y; break;
        case 4: sy = h - 1 - y; break;
        case 5: sx = y; sy = x; break;
        case 6: sx = y; sy = h - 1 - x; break;
        case 7: sx = w - 1 - y; sy = h - 1 - x; break;
        case 8: sx = w - 1 - y; sy = x; break;
      }
      std::memcpy(&out.rgb[(size_t(y) * size_t(out.width) + size_t(x)) * 3],
                  &img.rgb[(size_t(sy) * size_t(w) + size_t(sx)) * 3], 3);
    }
  return out;
}

}  // namespace vit
