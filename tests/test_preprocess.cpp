// Decoding and preprocessing: timm's goldens pixel by pixel (../shared/data), formats that must become
// RGB (grayscale, alpha, PNG, BMP), and every bad-image error with its message.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/error.h"
#include "engine/image.h"
#include "engine/preprocess.h"
#include "test_util.h"

#include <stb/stb_image_write.h>  // implementation: stb_image_write.cpp

namespace vit::test {
namespace {

const char* kGoldenStems[] = {"n01440764_tench",  "n01756291_sidewinder", "n02676566_acoustic_guitar",
                              "n03109150_corkscrew", "n03584829_iron",   "n04238763_slide_rule"};

PreprocessConfig deit_preprocessing() {
  PreprocessConfig c;
  c.crop_pct = 0.9;
  return c;
}

TEST(PreprocessGolden, DecodeResizeCropNormalizeMatchTimm) {
  REQUIRE_SHARED_DATA();
  SafeTensors ref(shared_data() + "/reference/deit_tiny_preprocessed.safetensors");
  const PreprocessConfig cfg = deit_preprocessing();
  for (const char* stem : kGoldenStems) {
    SCOPED_TRACE(stem);
    const Image img = decode_image_file(shared_data() + "/images/preprocessing/" + stem + ".JPEG");
    const Golden dec = read_golden(ref, std::string(stem) + ".decoded");
    ASSERT_EQ(dec.shape, (std::vector<int64_t>{img.height, img.width, 3}));
    EXPECT_EQ(img.rgb, dec.u8) << "decoded pixels differ from PIL's";

    const Image crop = resize_and_crop(img, cfg);
    const Golden rgb8 = read_golden(ref, std::string(stem) + ".rgb8");
    ASSERT_EQ(rgb8.u8.size(), crop.rgb.size());
    size_t equal = 0;
    int worst = 0;
    for (size_t i = 0; i < crop.rgb.size(); ++i) {
      const int d = std::abs(int(crop.rgb[i]) - int(rgb8.u8[i]));
      equal += d == 0;
      worst = std::max(worst, d);
    }
    EXPECT_GE(double(equal) / double(crop.rgb.size()), 0.999);
    EXPECT_LE(worst, 1);
    std::printf("%s: uint8 crop equal to timm's on %.4f%% of values, largest difference %d\n", stem,
                100.0 * double(equal) / double(crop.rgb.size()), worst);

    std::vector<float> x(size_t(3) * 224 * 224);
    normalize_to_chw(crop, cfg, x.data());
    const Golden t = read_golden(ref, stem);
    float maxd = 0;
    for (size_t i = 0; i < x.size(); ++i) maxd = std::max(maxd, std::fabs(x[i] - t.f32[i]));
    EXPECT_LT(maxd, worst == 0 ? 1e-6f : 0.02f);
  }
}

Image gradient(int w, int h) {
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.resize(size_t(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) img.rgb[(size_t(y) * w + x) * 3 + c] = uint8_t((x * 7 + y * 3 + c * 50) % 256);
  return img;
}

TEST(Resample, SameSizeIsIdentity) {
  const Image img = gradient(31, 17);
  EXPECT_EQ(resize_like_pil(img, 31, 17, Filter::Bicubic).rgb, img.rgb);
}

TEST(Resample, ConstantImageStaysConstant) {
  Image img = gradient(40, 30);
  std::fill(img.rgb.begin(), img.rgb.end(), 137);
  for (Filter f : {Filter::Bicubic, Filter::Bilinear, Filter::Lanczos, Filter::Nearest, Filter::Box, Filter::Hamming})
    for (auto [w, h] : {std::pair{13, 9}, std::pair{97, 71}}) {
      const Image out = resize_like_pil(img, w, h, f);
      ASSERT_EQ(out.rgb.size(), size_t(w) * h * 3);
      for (uint8_t v : out.rgb) ASSERT_EQ(v, 137) << filter_name(f);
    }
}

TEST(Resample, WindowEqualsCropOfFullResize) {
  const Image img = gradient(97, 61);
  for (Filter f : {Filter::Bicubic, Filter::Bilinear, Filter::Lanczos, Filter::Nearest})
    for (auto [w, h] : {std::pair{50, 33}, std::pair{150, 90}, std::pair{97, 40}, std::pair{60, 61}}) {
      const Image full = resize_like_pil(img, w, h, f);
      const Image win = resize_like_pil_window(img, w, h, f, 3, 5, w - 7, h - 9);
      for (int y = 0; y < h - 9; ++y)
        for (int x = 0; x < (w - 7) * 3; ++x)
          ASSERT_EQ(win.rgb[size_t(y) * (w - 7) * 3 + x], full.rgb[size_t(y + 5) * w * 3 + 9 + x])
              << filter_name(f) << " " << w << "x" << h << " at " << x << "," << y;
    }
}

TEST(Preprocess, CenterCropArithmetic) {
  // 849 wide after the resize: (849 - 224) / 2 = 312.5 rounds half to even: left 312.
  PreprocessConfig cfg = deit_preprocessing();
  const Image img = gradient(411, 120);  // resized to 849 x 248, as the slide rule golden
  const Image crop = resize_and_crop(img, cfg);
  EXPECT_EQ(crop.width, 224);
  EXPECT_EQ(crop.height, 224);
  const Image resized = resize_like_pil(img, 849, 248, Filter::Bicubic);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(crop.rgb[size_t(c)], resized.rgb[(size_t(12) * 849 + 312) * 3 + size_t(c)]);
}

TEST(Preprocess, SquashResizesBothSides) {
  PreprocessConfig cfg;
  cfg.crop_mode = "squash";
  cfg.crop_pct = 1.0;
  cfg.interpolation = Filter::Bilinear;
  const Image img = gradient(300, 100);
  EXPECT_EQ(resize_and_crop(img, cfg).rgb, resize_like_pil(img, 224, 224, Filter::Bilinear).rgb);
}

void write_png(const std::string& path, int w, int h, int comp, const std::vector<uint8_t>& px) {
  ASSERT_TRUE(stbi_write_png(path.c_str(), w, h, comp, px.data(), w * comp));
}

TEST(Decode, GrayscaleAndAlphaBecomeRgb) {
  TempDir d;
  std::vector<uint8_t> gray = {0, 50, 100, 150, 200, 250};
  write_png(d.file("g.png"), 3, 2, 1, gray);
  Image g = decode_image_file(d.file("g.png"));
  ASSERT_EQ(g.rgb.size(), 18u);
  for (size_t i = 0; i < 6; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(g.rgb[i * 3 + size_t(c)], gray[i]);

  std::vector<uint8_t> rgba = {10, 20, 30, 0, 40, 50, 60, 255};
  write_png(d.file("a.png"), 2, 1, 4, rgba);
  Image a = decode_image_file(d.file("a.png"));
  EXPECT_EQ(a.rgb, (std::vector<uint8_t>{10, 20, 30, 40, 50, 60}));  // alpha dropped, as convert('RGB')

  ASSERT_TRUE(stbi_write_bmp(d.file("b.bmp").c_str(), 2, 1, 3, a.rgb.data()));
  EXPECT_EQ(decode_image_file(d.file("b.bmp")).rgb, a.rgb);
}

TEST(Decode, JpegGrayscaleBecomesRgb) {
  TempDir d;
  std::vector<uint8_t> gray(64 * 48, 128);
  ASSERT_TRUE(stbi_write_jpg(d.file("g.jpg").c_str(), 64, 48, 1, gray.data(), 95));
  const Image img = decode_image_file(d.file("g.jpg"));
  ASSERT_EQ(img.width, 64);
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    EXPECT_EQ(img.rgb[i], img.rgb[i + 1]);
    EXPECT_EQ(img.rgb[i], img.rgb[i + 2]);
  }
}

void expect_decode_error(const std::string& path, const std::string& fragment) {
  try {
    decode_image_file(path);
    FAIL() << "no error for " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path, 0), 0u) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

TEST(DecodeErrors, MissingFile) { expect_decode_error("/nonexistent/cat.jpg", "No such file"); }

TEST(DecodeErrors, EmptyFile) {
  TempDir d;
  write_file(d.file("empty.jpg"), "");
  expect_decode_error(d.file("empty.jpg"), "empty file");
}

TEST(DecodeErrors, NotAnImage) {
  TempDir d;
  write_file(d.file("notes.jpg"), "this is a text file, not a photo\n");
  expect_decode_error(d.file("notes.jpg"), "not a supported image");
}

TEST(DecodeErrors, TruncatedJpeg) {
  TempDir d;
  std::vector<uint8_t> px(size_t(96) * 64 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 31 % 251);
  ASSERT_TRUE(stbi_write_jpg(d.file("full.jpg").c_str(), 96, 64, 3, px.data(), 90));
  const std::string bytes = read_file(d.file("full.jpg"));
  write_file(d.file("cut.jpg"), bytes.substr(0, bytes.size() / 2));
  expect_decode_error(d.file("cut.jpg"), "truncated JPEG");
}

TEST(DecodeErrors, CorruptJpegHeader) {
  TempDir d;
  write_file(d.file("bad.jpg"), std::string("\xFF\xD8\xFF\xE0garbage-garbage-garbage", 26));
  expect_decode_error(d.file("bad.jpg"), "cannot decode JPEG");
}

// A small valid file whose header claims width x height: what a decompression bomb looks like.
std::string jpeg_claiming(int w, int h, const TempDir& d) {
  std::vector<uint8_t> px(size_t(16) * 16 * 3, 90);
  EXPECT_TRUE(stbi_write_jpg(d.file("small.jpg").c_str(), 16, 16, 3, px.data(), 90));
  std::string bytes = read_file(d.file("small.jpg"));
  const size_t sof = bytes.find("\xFF\xC0");  // baseline frame header: FF C0 len(2) precision(1) H(2) W(2)
  EXPECT_NE(sof, std::string::npos);
  bytes[sof + 5] = char(h >> 8), bytes[sof + 6] = char(h & 0xff);
  bytes[sof + 7] = char(w >> 8), bytes[sof + 8] = char(w & 0xff);
  return bytes;
}

TEST(DecodeErrors, JpegBombRefusedFromItsHeader) {
  TempDir d;
  write_file(d.file("bomb.jpg"), jpeg_claiming(60000, 60000, d));  // 3.6 gigapixels in 700 bytes
  expect_decode_error(d.file("bomb.jpg"), "3600000000 pixels is over the limit of 100000000");
}

TEST(DecodeErrors, PngBombRefusedFromItsHeader) {
  TempDir d;
  write_png(d.file("small.png"), 4, 4, 3, std::vector<uint8_t>(48, 7));
  std::string bytes = read_file(d.file("small.png"));
  const size_t ihdr = bytes.find("IHDR");  // then width and height, big-endian u32
  for (int i = 0; i < 2; ++i) {
    const uint32_t v = 12000;  // 144 megapixels: stb itself refuses sizes above 2^30 bytes
    for (int b = 0; b < 4; ++b) bytes[ihdr + 4 + size_t(4 * i + b)] = char((v >> (24 - 8 * b)) & 0xff);
  }
  write_file(d.file("bomb.png"), bytes);
  expect_decode_error(d.file("bomb.png"), "144000000 pixels is over the limit");
}

TEST(Decode, PixelLimitIsConfigurable) {
  TempDir d;
  write_file(d.file("big.jpg"), jpeg_claiming(16, 16, d));
  EXPECT_EQ(decode_image_file(d.file("big.jpg"), 256).width, 16);
  try {
    decode_image_file(d.file("big.jpg"), 255);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("256 pixels is over the limit of 255"), std::string::npos) << e.what();
  }
}

// Found by fuzz_image (tests/fuzz/regressions/image/pnm_huge_width): stb_image overflowed an int
// reading this header's width.
TEST(DecodeErrors, PnmHeaderNumberTooLong) {
  TempDir d;
  write_file(d.file("x.ppm"), "P6\n4888888888888888888888 3\n255\n" + std::string(36, 'x'));
  expect_decode_error(d.file("x.ppm"), "PNM header holds a number over 8 digits");
  write_file(d.file("ok.ppm"), "P6\n# a comment\n4 3\n255\n" + std::string(36, 'x'));
  EXPECT_EQ(decode_image_file(d.file("ok.ppm")).width, 4);
}

TEST(DecodeErrors, Directory) {
  TempDir d;
  expect_decode_error(d.path(), "is a directory");
}

}  // namespace
}  // namespace vit::test
