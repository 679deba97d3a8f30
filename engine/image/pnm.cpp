// Binary PGM and PPM (P5, P6) decoded as Pillow 9.4's PpmImagePlugin and convert('RGB') do. Our own
// reader instead of stb_image's, which turns 16-bit PGMs into reads past its buffer (found by fuzz_image),
// keeps 16-bit samples' low bytes, ignores maxval and leaves a short file's pixels uninitialised.
#include "engine/image/pnm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "vit/error.h"

namespace vit {
namespace {

bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// PIL's _read_token: leading whitespace skipped; '#' skips past the next CR or LF, also inside a number;
// the whitespace ending a token is consumed (so the pixels start right after maxval's); at most 10 bytes.
int64_t read_number(const uint8_t* d, size_t n, size_t* i, const char* what, const std::string& name) {
  std::string token;
  while (token.size() <= 10 && *i < n) {
    const uint8_t c = d[(*i)++];
    if (is_space(c)) {
      if (token.empty()) continue;
      break;
    }
    if (c == '#') {
      while (*i < n && d[*i] != '\r' && d[*i] != '\n') ++*i;
      if (*i < n) ++*i;
      continue;
    }
    token += char(c);
  }
  if (token.empty()) throw Error(name, std::string("PNM header ends before its ") + what);
  if (token.size() > 10) throw Error(name, std::string("PNM header's ") + what + " is over 10 characters");
  if (!std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw Error(name, std::string("PNM header's ") + what + " \"" + token + "\" is not a number");
  return std::stoll(token);
}

}  // namespace

Image decode_pnm(const uint8_t* d, size_t n, const std::string& name, int64_t max_pixels) {
  const bool gray = d[1] == '5';
  size_t i = 3;  // "P5" or "P6" and one whitespace: what image_format() recognised
  const int64_t w = read_number(d, n, &i, "width", name);
  const int64_t h = read_number(d, n, &i, "height", name);
  const int64_t maxval = read_number(d, n, &i, "maxval", name);
  if (maxval < 1 || maxval > 65535)
    throw Error(name, "PNM maxval " + std::to_string(maxval) + " is not between 1 and 65535");
  check_image_size(w, h, max_pixels, name);
  if (w > INT32_MAX || h > INT32_MAX) throw Error(name, "PNM of " + std::to_string(w) + "x" + std::to_string(h) + " pixels: a side is over 2^31");
  const size_t channels = gray ? 1 : 3, bytes = maxval > 255 ? 2 : 1;
  const size_t samples = size_t(w) * size_t(h) * channels;
  if (n - i < samples * bytes)
    throw Error(name, "truncated PNM: " + std::to_string(n - i) + " bytes of pixels where " + std::to_string(w) +
                          "x" + std::to_string(h) + " needs " + std::to_string(samples * bytes));
  // PIL scales each sample to out_max = 255 (mode L or RGB), or 65535 for gray over 8 bits (mode I), as
  // min(out_max, round(value / maxval * out_max)); convert('RGB') then clips mode I at 255.
  const double out_max = gray && maxval > 255 ? 65535 : 255;
  std::vector<uint8_t> lut(bytes == 2 ? 65536 : 256);
  for (size_t v = 0; v < lut.size(); ++v)
    lut[v] = uint8_t(std::min(255.0, std::min(out_max, std::nearbyint(double(v) / double(maxval) * out_max))));
  Image img;
  img.width = int(w);
  img.height = int(h);
  img.rgb.resize(size_t(w) * size_t(h) * 3);
  const uint8_t* p = d + i;
  for (size_t s = 0; s < samples; ++s, p += bytes) {
    const uint8_t v = lut[bytes == 2 ? size_t(p[0]) << 8 | p[1] : p[0]];
    if (gray)
      img.rgb[3 * s] = img.rgb[3 * s + 1] = img.rgb[3 * s + 2] = v;
    else
      img.rgb[s] = v;
  }
  return img;
}

}  // namespace vit
