// libFuzzer target: bytes through our side of OpenCV's plugin (engine/image/opencv_io.h): recognition by content,
// the plugin's loading, the pixel limit (OPENCV_IO_MAX_IMAGE_PIXELS, set small before the first decode),
// the decoded-size check, EXIF orientation and preprocessing. Debian's OpenCV, libwebp, libtiff and
// OpenJPEG run uninstrumented underneath: a crash inside them is reported like one of ours, not hidden.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/image/image.h"
#include "engine/preprocess/preprocess.h"
#include "vit/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::vector<float> out(size_t(3) * 224 * 224);
  try {
    const bool turn = size && (data[size - 1] & 2);  // the EXIF orientation of WebP and TIFF too
    const vit::Image img = vit::decode_image(data, size, "fuzz-input", int64_t(1) << 20, turn);
    vit::preprocess(img, vit::PreprocessConfig{}, out.data());
  } catch (const vit::Error&) {
  }
  return 0;
}
