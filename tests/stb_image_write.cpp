// stb_image_write's implementation, for the tests and the fuzz corpus to write PNG, BMP, TGA and JPEG
// files. Its own file so sanitizer builds can skip the check its JPEG writer trips (left shifts of
// negative values: defined in C++20 and what every compiler does; see tests/CMakeLists.txt).
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
