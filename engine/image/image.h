// Decodes image files to 8-bit RGB, the way PIL's Image.open(...).convert('RGB') does for timm:
// JPEG through libjpeg-turbo (PIL's decoder, same pixels), PNG/BMP/GIF/TGA through stb_image, binary
// PGM/PPM as PIL reads them (pnm.h), WebP/TIFF/JPEG 2000 through OpenCV's plugin (opencv_io.h); grayscale and alpha become RGB; no EXIF
// rotation unless asked for (orientation.h). Any failure throws vit::Error naming the file.
// Dimensions are read from the header and checked against max_pixels before anything is decoded.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vit/limits.h"

namespace vit {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3]
};

// Throws vit::Error naming the file for a zero side or more than max_pixels pixels (no overflow).
void check_image_size(int64_t w, int64_t h, int64_t max_pixels, const std::string& name);

// "WxH = N pixels is over the limit of MAX (--max-pixels)": how every decoder words a refused size.
std::string over_pixel_limit(int64_t w, int64_t h, int64_t max_pixels);

// What encoded bytes are, from their first bytes (never a file's name): the formats a decoder is chosen by.
enum class ImageFormat { Jpeg, Png, WebP, Tiff, Jpeg2000, Pnm, Other };  // Pnm: P1 to P6
ImageFormat image_format(const uint8_t* data, size_t size);

// The width and height an image's header declares, read without decoding it, for the formats whose header is
// read here (JPEG, PNG, BMP, GIF, TGA); false for the others (WebP, TIFF, JPEG 2000, PNM: their decoders
// read it) and for bytes that are no image. format: image_format(data, size), as the caller sniffed it.
bool read_image_size(const uint8_t* data, size_t size, ImageFormat format, int64_t* width, int64_t* height);

// out(x, y) = src(cols[x], rows[y]), black where an index is -1: crops, pads and nearest-neighbour resizes.
Image pick_pixels(const Image& src, const std::vector<int>& cols, const std::vector<int>& rows);

// exif_transpose: turn the image as its EXIF orientation says, as PIL's ImageOps.exif_transpose does.
Image decode_image_file(const std::string& path, int64_t max_pixels = kDefaultMaxPixels, bool exif_transpose = false);
Image decode_image(const uint8_t* data, size_t size, const std::string& name,
                   int64_t max_pixels = kDefaultMaxPixels, bool exif_transpose = false);

}  // namespace vit
