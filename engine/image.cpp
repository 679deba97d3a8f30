// Image decoding: libjpeg-turbo for JPEG (truncation is an error, as in PIL), stb_image for the rest.
#include "image.h"

#include <jpeglib.h>
#include <jerror.h>
#include <sys/stat.h>

#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "error.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_ONLY_TGA
#define STBI_ONLY_PNM
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
#include <stb/stb_image.h>

namespace vit {
namespace {

// PIL refuses images above this many pixels (its decompression-bomb limit); so do we.
constexpr int64_t kMaxPixels = 2 * 89478485;

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

void check_size(int64_t w, int64_t h, const std::string& name) {
  if (w <= 0 || h <= 0) throw Error(name + ": image has zero size (" + std::to_string(w) + "x" +
                                    std::to_string(h) + ")");
  if (w * h > kMaxPixels)
    throw Error(name + ": image of " + std::to_string(w) + "x" + std::to_string(h) +
                " pixels is larger than the limit of " + std::to_string(kMaxPixels));
}

// Returns false with err->message set when libjpeg failed; no C++ objects live across setjmp.
// Leaves out->rgb empty when the dimensions are out of range, for the caller to report.
bool jpeg_decode(const uint8_t* data, size_t size, JpegErr* err, jpeg_decompress_struct* cinfo,
                 Image* out) {
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
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(cinfo);
  const int64_t w = cinfo->output_width, h = cinfo->output_height;
  out->width = int(w);
  out->height = int(h);
  if (w <= 0 || h <= 0 || w * h > kMaxPixels) {
    jpeg_destroy_decompress(cinfo);
    return true;
  }
  out->width = int(w);
  out->height = int(h);
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

}  // namespace

Image decode_image(const uint8_t* data, size_t size, const std::string& name) {
  if (size == 0) throw Error(name + ": empty file, not an image");
  Image img;
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
    JpegErr err{};
    jpeg_decompress_struct cinfo{};
    const bool ok = jpeg_decode(data, size, &err, &cinfo, &img);
    std::free(err.row_buf);
    if (!ok) {
      std::string msg = err.message;
      if (err.mgr.msg_code == JWRN_JPEG_EOF) msg = "truncated JPEG (" + msg + ")";
      throw Error(name + ": cannot decode JPEG: " + msg);
    }
    if (img.rgb.empty()) check_size(img.width, img.height, name);
    return img;
  }
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(data, int(size), &w, &h, &comp)) {
    const std::string why = stbi_failure_reason();  // stb's generic answer adds nothing to ours
    throw Error(name + ": not a supported image (JPEG, PNG, BMP, GIF, TGA, PNM)" +
                (why.find("not of any known type") == std::string::npos ? ": " + why : std::string()));
  }
  check_size(w, h, name);
  std::unique_ptr<uint8_t, void (*)(void*)> px(stbi_load_from_memory(data, int(size), &w, &h, &comp, 3),
                                               stbi_image_free);
  if (!px) throw Error(name + ": cannot decode image: " + stbi_failure_reason());
  img.width = w;
  img.height = h;
  img.rgb.assign(px.get(), px.get() + size_t(w) * size_t(h) * 3);
  return img;
}

Image decode_image_file(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) throw Error(path + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw Error(path + ": is a directory, not an image");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  if (!bytes.empty() && !in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size())))
    throw Error(path + ": read failed");
  return decode_image(bytes.data(), bytes.size(), path);
}

}  // namespace vit
