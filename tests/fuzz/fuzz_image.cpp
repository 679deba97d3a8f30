// libFuzzer target: arbitrary bytes through image decoding (libjpeg-turbo, stb_image), EXIF orientation
// and timm's preprocessing (WebP, TIFF and JPEG 2000: fuzz_opencv). Any input must end in an image or a vit::Error, never a crash, leak or hang.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vit/error.h"
#include "engine/image/image.h"
#include "engine/preprocess/preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::vector<float> out(size_t(3) * 224 * 224);
  try {
    // A lower pixel limit than the default keeps each run fast; the limit's check is what is tested.
    const bool turn = size && (data[size - 1] & 2);  // also EXIF orientation: parsing, then turning
    const vit::Image img = vit::decode_image(data, size, "fuzz-input", int64_t(1) << 22, turn);
    vit::PreprocessConfig cfg;
    if (size && (data[size - 1] & 1)) {  // also the Hugging Face path: squash, bilinear
      cfg.crop_mode = vit::CropMode::Squash;
      cfg.crop_pct = 1.0;
      cfg.interpolation = vit::Filter::Bilinear;
    }
    vit::preprocess(img, cfg, out.data());
  } catch (const vit::Error&) {
  }
  return 0;
}
