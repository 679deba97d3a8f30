// Image decoding: libjpeg-turbo for JPEG (truncation is an error, as in PIL), OpenCV's plugin for WebP,
// TIFF and JPEG 2000 (opencv_io.h), our PGM/PPM reader (pnm.h), stb_image for PNG, BMP, GIF and TGA;
// EXIF orientation when asked (orientation.h).
#include "engine/image/image.h"

#include <jpeglib.h>
#include <jerror.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include "engine/io/files.h"
#include "engine/image/opencv_io.h"
#include "engine/image/orientation.h"
#include "engine/image/pnm.h"
#include "vit/error.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_ONLY_TGA
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
#include <stb/stb_image.h>

namespace vit {
namespace {

struct JpegErr {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  uint8_t* row_buf;  // CMYK rows; freed by the caller, also after a failure
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErr*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings are ignored like PIL does, except running out of data: PIL reports a truncated file.
void jpeg_emit_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_error_exit(cinfo);
}

// Returns false with err->message set when libjpeg failed; no C++ objects live across setjmp.
// Leaves out->rgb empty when the header's dimensions are out of range (nothing decoded), for the caller
// to report.
bool jpeg_decode(const uint8_t* data, size_t size, int64_t max_pixels, JpegErr* err,
                 jpeg_decompress_struct* cinfo, Image* out) {
  cinfo->err = jpeg_std_error(&err->mgr);
  err->mgr.error_exit = jpeg_error_exit;
  err->mgr.emit_message = jpeg_emit_message;
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  const int64_t w = cinfo->image_width, h = cinfo->image_height;
  out->width = int(w);
  out->height = int(h);
  if (w <= 0 || h <= 0 || w * h > max_pixels) {
    jpeg_destroy_decompress(cinfo);
    return true;
  }
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(cinfo);
  out->rgb.resize(size_t(w * h * 3));
  std::vector<uint8_t>& px = out->rgb;
  if (cmyk) err->row_buf = static_cast<uint8_t*>(std::malloc(size_t(w) * 4));
  uint8_t* row_buf = err->row_buf;
  while (cinfo->output_scanline < cinfo->output_height) {
    uint8_t* dst = px.data() + size_t(cinfo->output_scanline) * size_t(w) * 3;
    JSAMPROW row = cmyk ? row_buf : dst;
    jpeg_read_scanlines(cinfo, &row, 1);
    if (cmyk) {
      // PIL reads Adobe CMYK inverted ("CMYK;I"), then converts like Convert.c's cmyk2rgb.
      const bool inv = cinfo->saw_Adobe_marker;
      for (int64_t x = 0; x < w; ++x) {
        int c[4];
        for (int k = 0; k < 4; ++k) c[k] = inv ? 255 - row_buf[4 * x + k] : row_buf[4 * x + k];
        const int nk = 255 - c[3];
        for (int k = 0; k < 3; ++k) {
          int t = c[k] * nk + 128;
          int v = nk - (((t >> 8) + t) >> 8);
          dst[3 * x + k] = uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
        }
      }
    }
  }
  jpeg_finish_decompress(cinfo);
  jpeg_destroy_decompress(cinfo);
  return true;
}

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// A PNG's empty IDAT chunks (legal, and nothing to decode) make stb_image copy zero bytes into a buffer it
// has not allocated yet, memcpy(NULL, ..., 0), undefined behaviour found by fuzz_image: such chunks are
// dropped from a copy first. Returns false, copying nothing, when there are none.
bool drop_empty_idat(const uint8_t* d, size_t n, std::vector<uint8_t>* out) {
  const auto length = [&](size_t i) { return size_t(be32(d + i)); };
  const auto empty_idat = [&](size_t i) { return length(i) == 0 && std::memcmp(d + i + 4, "IDAT", 4) == 0; };
  bool any = false;
  for (size_t i = 8; i + 12 <= n && !any; i += 12 + length(i)) {
    if (length(i) > n - i - 12) break;
    any = empty_idat(i);
  }
  if (!any) return false;
  out->assign(d, d + 8);
  size_t i = 8;
  for (; i + 12 <= n && length(i) <= n - i - 12; i += 12 + length(i))
    if (!empty_idat(i)) out->insert(out->end(), d + i, d + i + 12 + length(i));
  out->insert(out->end(), d + i, d + n);  // whatever does not parse as chunks stays, for stb to judge
  return true;
}

// A paletted BMP's pixels may index past its palette, where stb_image reads its own uninitialised stack
// (upstream issue 1929) and PIL reads its default palette, a gray ramp (i, i, i). The palette is padded
// to 2^bpp entries of that ramp in a copy, so stb gives PIL's pixels. stb sizes the palette from the
// pixel data's offset, as here. Returns false, copying nothing, when there is nothing to pad.
bool pad_bmp_palette(const uint8_t* d, size_t n, std::vector<uint8_t>* out) {
  if (n < 30 || d[0] != 'B' || d[1] != 'M') return false;
  const auto le = [&](size_t i, int bytes) {
    uint32_t v = 0;
    for (int b = bytes - 1; b >= 0; --b) v = v << 8 | d[i + size_t(b)];
    return v;
  };
  const uint32_t offset = le(10, 4), header = le(14, 4);
  const bool os2 = header == 12;  // OS/2 headers: 3-byte palette entries
  const uint32_t bpp = os2 ? le(24, 2) : le(28, 2), entry = os2 ? 3 : 4;
  if ((bpp != 1 && bpp != 4 && bpp != 8) || header > n || offset < 14 + header) return false;
  const uint32_t have = (offset - 14 - header) / entry, full = 1u << bpp;
  const size_t end = 14 + size_t(header) + size_t(have) * entry;  // where the palette read by stb ends
  if (have == 0 || have >= full || end > n) return false;         // nothing to pad, or stb refuses it
  out->assign(d, d + end);
  for (uint32_t i = have; i < full; ++i) {
    const uint8_t gray[4] = {uint8_t(i), uint8_t(i), uint8_t(i), 0};
    out->insert(out->end(), gray, gray + entry);
  }
  out->insert(out->end(), d + end, d + n);
  const uint32_t moved = offset + (full - have) * entry;
  for (int b = 0; b < 4; ++b) (*out)[10 + size_t(b)] = uint8_t(moved >> (8 * b));
  return true;
}

// stb_image copies an uncompressed TGA's rows without checking that the file holds them, leaving the
// rest of its buffer uninitialised (upstream's CVE-2023-45663): such a file is refused as truncated, as
// PIL refuses it. TGA has no magic; stb tries it last, so anything not PNG, BMP or GIF that stb read is one.
void check_tga_length(const uint8_t* d, size_t n, ImageFormat format, int w, int h, const std::string& name) {
  if (n < 18 || format == ImageFormat::Png || std::memcmp(d, "BM", 2) == 0 || std::memcmp(d, "GIF8", 4) == 0)
    return;
  const bool uncompressed_truecolor = d[1] == 0 && (d[2] == 2 || d[2] == 3);
  if (!uncompressed_truecolor) return;  // RLE and colour-mapped data are read byte by byte: zeros past the end
  const size_t need = 18 + size_t(d[0]) + size_t(w) * size_t(h) * ((size_t(d[16]) + 7) / 8);
  if (n < need)
    throw Error(name, "truncated TGA: " + std::to_string(n) + " bytes where " + std::to_string(w) + "x" +
                          std::to_string(h) + " needs " + std::to_string(need));
}

// A WebP's canvas size from its first chunk (RIFF header, then VP8X, VP8 or VP8L; the WebP container
// specification): VP8X holds it as 24-bit sides minus one, VP8 as 14-bit sides after its frame tag and
// start code, VP8L as 14-bit sides minus one after its signature byte.
bool webp_size(const uint8_t* d, size_t n, int64_t* w, int64_t* h) {
  if (n < 30) return false;
  const auto le = [&](size_t i, int bytes) {
    int64_t v = 0;
    for (int b = bytes - 1; b >= 0; --b) v = v << 8 | d[i + size_t(b)];
    return v;
  };
  if (std::memcmp(d + 12, "VP8X", 4) == 0) {
    *w = le(24, 3) + 1;
    *h = le(27, 3) + 1;
  } else if (std::memcmp(d + 12, "VP8 ", 4) == 0 && d[23] == 0x9d && d[24] == 0x01 && d[25] == 0x2a) {
    *w = le(26, 2) & 0x3fff;
    *h = le(28, 2) & 0x3fff;
  } else if (std::memcmp(d + 12, "VP8L", 4) == 0 && d[20] == 0x2f) {
    const int64_t bits = le(21, 4);
    *w = (bits & 0x3fff) + 1;
    *h = ((bits >> 14) & 0x3fff) + 1;
  } else {
    return false;
  }
  return *w > 0 && *h > 0;
}

// Decodes bytes of the format image_format() found in them, with the decoder for it.
Image decode_as(const uint8_t* data, size_t size, ImageFormat format, const std::string& name, int64_t max_pixels) {
  Image img;
  if (format == ImageFormat::Jpeg) {
    JpegErr err{};
    jpeg_decompress_struct cinfo{};
    const bool ok = jpeg_decode(data, size, max_pixels, &err, &cinfo, &img);
    std::free(err.row_buf);
    if (!ok) {
      std::string msg = err.message;
      if (err.mgr.msg_code == JWRN_JPEG_EOF) msg = "truncated JPEG (" + msg + ")";
      throw Error(name, "cannot decode JPEG: " + msg);
    }
    if (img.rgb.empty()) check_image_size(img.width, img.height, max_pixels, name);
    return img;
  }
  if (opencv_image_format(format)) return decode_with_opencv(data, size, format, name, max_pixels);
  if (size > size_t(INT32_MAX)) throw Error(name, "file of " + std::to_string(size) + " bytes is too large for an image");
  if (format == ImageFormat::Pnm) {
    if (data[1] != '5' && data[1] != '6')
      throw Error(name, std::string("PNM P") + char(data[1]) + " (plain text or 1-bit) is not read; binary P5 and P6 are");
    return decode_pnm(data, size, name, max_pixels);
  }
  // PNG: the size from IHDR first, so that the limit message comes whatever stb_image thinks of the size.
  const bool png = format == ImageFormat::Png && size >= 24 && std::memcmp(data + 12, "IHDR", 4) == 0;
  const int64_t png_w = png ? be32(data + 16) : 0, png_h = png ? be32(data + 20) : 0;
  if (png) check_image_size(png_w, png_h, max_pixels, name);
  std::vector<uint8_t> rewritten;
  if ((png && drop_empty_idat(data, size, &rewritten)) || pad_bmp_palette(data, size, &rewritten)) {
    data = rewritten.data();
    size = rewritten.size();
  }
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(data, int(size), &w, &h, &comp)) {
    // stb_image refuses PNGs over 2^30 decoded bytes (and then reports the last format it tried).
    if (png && png_w * png_h * 4 > (int64_t(1) << 30))
      throw Error(name, "PNG of " + std::to_string(png_w) + "x" + std::to_string(png_h) +
                            " pixels is too large for the PNG decoder (stb_image decodes at most 2^30 bytes)");
    const std::string why = stbi_failure_reason();  // stb's generic answer adds nothing to ours
    throw Error(name, "not a supported image (JPEG, PNG, BMP, GIF, TGA, PNM, WebP, TIFF, JPEG 2000)" +
                (why.find("not of any known type") == std::string::npos ? ": " + why : std::string()));
  }
  check_image_size(w, h, max_pixels, name);
  check_tga_length(data, size, format, w, h, name);
  std::unique_ptr<uint8_t, void (*)(void*)> px(stbi_load_from_memory(data, int(size), &w, &h, &comp, 3),
                                               stbi_image_free);
  if (!px) throw Error(name, std::string("cannot decode image: ") + stbi_failure_reason());
  img.width = w;
  img.height = h;
  img.rgb.assign(px.get(), px.get() + size_t(w) * size_t(h) * 3);
  return img;
}

}  // namespace

void check_image_size(int64_t w, int64_t h, int64_t max_pixels, const std::string& name) {
  if (w <= 0 || h <= 0) throw Error(name, "image has zero size (" + std::to_string(w) + "x" +
                                    std::to_string(h) + ")");
  if (w > max_pixels / h)  // w * h > max_pixels; a PNG's sides reach 2^32 each, and their product overflows
    throw Error(name, "image of " + over_pixel_limit(w, h, max_pixels) + "; not decoded");
}

std::string over_pixel_limit(int64_t w, int64_t h, int64_t max_pixels) {
  return std::to_string(w) + "x" + std::to_string(h) + " = " + std::to_string(uint64_t(w) * uint64_t(h)) +
         " pixels is over the limit of " + std::to_string(max_pixels) + " (--max-pixels)";
}

ImageFormat image_format(const uint8_t* d, size_t n) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  static const uint8_t kJp2[12] = {0, 0, 0, 0x0C, 'j', 'P', ' ', ' ', '\r', '\n', 0x87, '\n'};
  static const uint8_t kJ2k[4] = {0xFF, 0x4F, 0xFF, 0x51};
  if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return ImageFormat::Jpeg;
  if (n >= 8 && std::memcmp(d, kPng, 8) == 0) return ImageFormat::Png;
  if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0) return ImageFormat::WebP;
  if (n >= 4 && (std::memcmp(d, "II*\0", 4) == 0 || std::memcmp(d, "MM\0*", 4) == 0)) return ImageFormat::Tiff;
  if ((n >= 12 && std::memcmp(d, kJp2, 12) == 0) || (n >= 4 && std::memcmp(d, kJ2k, 4) == 0)) return ImageFormat::Jpeg2000;
  const auto space = [](uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); };  // PIL's whitespace
  if (n >= 3 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6' && space(d[2])) return ImageFormat::Pnm;
  return ImageFormat::Other;
}

Image decode_image(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels,
                   bool exif_transpose) {
  if (size == 0) throw Error(name, "empty file, not an image");
  const ImageFormat format = image_format(data, size);  // the one look at what the bytes are
  Image img = decode_as(data, size, format, name, max_pixels);
  if (!exif_transpose) return img;
  return apply_orientation(img, exif_orientation(data, size, format));
}

bool read_image_size(const uint8_t* data, size_t size, ImageFormat format, int64_t* width, int64_t* height) {
  *width = *height = 0;
  if (format == ImageFormat::Jpeg) {  // jpeg_decode with no pixels allowed reads the header alone
    JpegErr err{};
    jpeg_decompress_struct cinfo{};
    Image img;
    const bool ok = jpeg_decode(data, size, 0, &err, &cinfo, &img);
    std::free(err.row_buf);
    *width = img.width;
    *height = img.height;
    return ok && img.width > 0 && img.height > 0;
  }
  if (format == ImageFormat::Png) {
    if (size < 24 || std::memcmp(data + 12, "IHDR", 4) != 0) return false;
    *width = be32(data + 16);
    *height = be32(data + 20);
    return *width > 0 && *height > 0;
  }
  if (format == ImageFormat::WebP) return webp_size(data, size, width, height);
  if (format != ImageFormat::Other || size > size_t(INT32_MAX)) return false;
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(data, int(size), &w, &h, &comp)) return false;
  *width = w;
  *height = h;
  return w > 0 && h > 0;
}

Image pick_pixels(const Image& src, const std::vector<int>& cols, const std::vector<int>& rows) {
  Image out;
  out.width = int(cols.size());
  out.height = int(rows.size());
  out.rgb.assign(cols.size() * rows.size() * 3, 0);
  for (size_t y = 0; y < rows.size(); ++y) {
    if (rows[y] < 0) continue;
    const uint8_t* in = &src.rgb[size_t(rows[y]) * size_t(src.width) * 3];
    uint8_t* o = &out.rgb[y * cols.size() * 3];
    for (size_t x = 0; x < cols.size(); ++x)
      if (cols[x] >= 0) std::memcpy(o + 3 * x, in + 3 * size_t(cols[x]), 3);
  }
  return out;
}

Image decode_image_file(const std::string& path, int64_t max_pixels, bool exif_transpose) {
  // No image within max_pixels takes more than 8 bytes a pixel (16-bit RGBA, uncompressed), plus room
  // for metadata: a larger file is refused unread.
  const uint64_t max_bytes = uint64_t(std::max<int64_t>(max_pixels, 0)) * 8 + (uint64_t(64) << 20);
  const std::vector<uint8_t> bytes = read_file_bytes(path, max_bytes);
  return decode_image(bytes.data(), bytes.size(), path, max_pixels, exif_transpose);
}

}  // namespace vit
