// EXIF orientation, applied as PIL's ImageOps.exif_transpose applies it: only when asked for, since
// timm (and so the model's training) does not. Read from a JPEG's APP1 Exif segment, a PNG's eXIf chunk,
// a WebP's EXIF chunk or a TIFF's first directory.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/image/image.h"

namespace vit {

// The EXIF orientation tag (1 to 8) of an encoded image; 1 (as stored) when it has none or it is
// unreadable. format: image_format(data, size), as the caller sniffed it.
int exif_orientation(const uint8_t* data, size_t size, ImageFormat format);

// The image as it is meant to be seen: orientation 2 mirrors it, 3 turns it half round, 4 flips it,
// 5 transposes, 6 turns it a quarter clockwise, 7 transverses, 8 turns it a quarter counter-clockwise
// (PIL's FLIP_LEFT_RIGHT, ROTATE_180, FLIP_TOP_BOTTOM, TRANSPOSE, ROTATE_270, TRANSVERSE, ROTATE_90).
Image apply_orientation(const Image& img, int orientation);

}  // namespace vit
