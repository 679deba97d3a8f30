// Binary PGM and PPM (P5, P6) decoded as Pillow's PpmImagePlugin and convert('RGB') do, which is what
// timm sees: samples scaled from maxval to 0..255 and rounded as Python rounds; 16-bit gray goes through
// PIL's mode "I" and is clipped at 255, as PIL does.
#pragma once
#include <cstdint>
#include <string>

#include "engine/image/image.h"

namespace vit {

// Throws vit::Error naming the file for a damaged header, a short file or a size over max_pixels.
Image decode_pnm(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels);

}  // namespace vit
