// Decoding and preprocessing: Pillow's resampling and CMYK decoding against the goldens committed in
// tests/data, formats that must become RGB (grayscale, alpha, PNG, BMP), and every bad-image error with
// its message. (timm's goldens on real photos, from ../shared/data, are in test_goldens.cpp.)
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>

#include "vit/error.h"
#include "engine/image/image.h"
#include "engine/io/files.h"
#include "engine/preprocess/preprocess.h"
#include "test_util.h"

#include <stb/stb_image_write.h>  // implementation: stb_image_write.cpp

namespace vit::test {
namespace {

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

// Pillow 9.4's Image.resize of a 13x11 image with every filter, down, up and one side each way.
TEST(Resample, MatchesPillowForEveryFilter) {
  const Image src = decode_image_file(test_data("resample_src.png"));
  ASSERT_EQ(src.width, 13);
  SafeTensors gold(test_data("goldens.safetensors"));
  for (Filter f : {Filter::Nearest, Filter::Box, Filter::Bilinear, Filter::Hamming, Filter::Bicubic, Filter::Lanczos})
    for (auto [w, h] : {std::pair{5, 4}, std::pair{21, 17}, std::pair{13, 6}}) {
      const Golden want = read_golden(gold, std::string(filter_name(f)) + "_" + std::to_string(w) + "x" + std::to_string(h));
      EXPECT_EQ(resize_like_pil(src, w, h, f).rgb, want.u8) << filter_name(f) << " " << w << "x" << h;
    }
}

// torch.nn.functional.interpolate(bicubic, antialias=True), as timm's resample_abs_pos_embed calls it.
TEST(Resample, GridMatchesTorchAntialiasedBicubic) {
  SafeTensors gold(test_data("goldens.safetensors"));
  const Golden in = read_golden(gold, "grid_in");  // [4, 4, 3]
  for (auto [h, w] : {std::pair{6, 6}, std::pair{3, 5}, std::pair{7, 2}}) {
    const Golden want = read_golden(gold, "grid_" + std::to_string(h) + "x" + std::to_string(w));
    const auto got = resample_grid(in.f32.data(), 4, 4, 3, h, w, Filter::Bicubic);
    EXPECT_LT(max_abs_diff(got, want.f32), 1e-5f) << h << "x" << w;
  }
}

// torch.nn.functional.interpolate(bicubic, align_corners=False) without antialiasing, given a size, as
// transformers' Dinov2, CLIP and SigLIP resample their position tables: torch 1.13's values for a 2 x 4 grid
// (one channel) upscaled, downscaled, and both at once.
TEST(Resample, InterpolateMatchesTorchPlainBicubic) {
  const std::vector<float> in = {0.f, 1.f, 4.f, 9.f, 2.f, -1.f, 0.5f, 3.f};
  const struct {
    int h, w;
    std::vector<float> want;
  } cases[] = {{2, 7, {-0.09921646f, 0.1562487f, 0.8042082f, 2.125f, 4.424653f, 7.480775f, 9.496082f, 2.29765f,
                       0.8855231f, -0.8976402f, -0.7656248f, 0.7123265f, 2.240388f, 3.248041f}},
               {2, 3, {0.09143502f, 2.125f, 8.334492f, 1.543403f, -0.7656248f, 2.667245f}},
               {3, 2, {0.206543f, 7.205785f, 0.2890625f, 4.335938f, 0.371582f, 1.466093f}}};
  for (const auto& c : cases)
    EXPECT_LT(max_abs_diff(interpolate_bicubic(in.data(), 2, 4, 1, c.h, c.w), c.want), 1e-5f) << c.h << "x" << c.w;
  // Three channels, each its own grid; at the same size, the grid itself.
  std::vector<float> rgb;
  for (float v : in) rgb.insert(rgb.end(), {v, 2 * v, -v});
  const auto got = interpolate_bicubic(rgb.data(), 2, 4, 3, 2, 7);
  for (size_t i = 0; i < cases[0].want.size(); ++i) EXPECT_NEAR(got[3 * i + 1], 2 * cases[0].want[i], 2e-5f);
  EXPECT_EQ(interpolate_bicubic(rgb.data(), 2, 4, 3, 2, 4), rgb);
}

// A CMYK JPEG written by Pillow (Adobe marker, inverted) and the RGB Pillow's convert('RGB') gives.
TEST(Decode, CmykJpegMatchesPillow) {
  const Image img = decode_image_file(test_data("cmyk.jpg"));
  const Golden want = read_golden(SafeTensors(test_data("goldens.safetensors")), "cmyk_rgb");
  ASSERT_EQ(want.shape, (std::vector<int64_t>{img.height, img.width, 3}));
  EXPECT_EQ(img.rgb, want.u8);
}

// Found by fuzz_image (tests/fuzz/regressions/image/extreme-shape.ppm, 4 x 888888): resizing the shorter
// side to 248 made the other 55 million pixels long, and the filter weights for all of them took 2.2 GB
// though the crop keeps 224. Only the kept window's weights are computed now; at 1 x 4,000,000 the whole
// row's weights would take 40 GB, so this test would fail with std::bad_alloc without that.
TEST(Preprocess, ExtremeShapeCostsOnlyTheCroppedWindow) {
  Image img;
  img.width = 1;
  img.height = 4'000'000;
  img.rgb.assign(size_t(img.height) * 3, 128);
  const PreprocessConfig cfg;
  std::vector<float> out(size_t(3) * cfg.height * cfg.width);
  preprocess(img, cfg, out.data());
  for (int c = 0; c < 3; ++c)
    for (size_t i = 0; i < size_t(cfg.height) * cfg.width; ++i)
      ASSERT_EQ(out[size_t(c) * cfg.height * cfg.width + i], (128.f / 255.f - cfg.mean[c]) / cfg.std[c]);
}

// Also found by fuzz_image (extreme-shape-squashed.ppm, a 27-second run): the same shape squashed to
// 224 x 224 needs Pillow's horizontal pass over all 888888 rows, 50 times the image: refused, clearly.
TEST(Preprocess, ExtremeShapeThatPillowWouldBlowUpIsRefused) {
  Image img;
  img.width = 4;
  img.height = 888'888;
  img.rgb.assign(size_t(img.width) * img.height * 3, 7);
  PreprocessConfig cfg;
  cfg.crop_mode = CropMode::Squash;
  cfg.crop_pct = 1.0;
  std::vector<float> out(size_t(3) * cfg.height * cfg.width);
  expect_error([&] { preprocess(img, cfg, out.data()); }, "image of 4x888888 pixels has too extreme a shape");
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
  PreprocessConfig cfg;
  cfg.crop_pct = 0.9;  // DeiT's
  const Image img = gradient(411, 120);  // resized to 849 x 248, as the slide rule golden
  const Image crop = resize_and_crop(img, cfg);
  EXPECT_EQ(crop.width, 224);
  EXPECT_EQ(crop.height, 224);
  const Image resized = resize_like_pil(img, 849, 248, Filter::Bicubic);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(crop.rgb[size_t(c)], resized.rgb[(size_t(12) * 849 + 312) * 3 + size_t(c)]);
}

TEST(Preprocess, SquashResizesBothSides) {
  PreprocessConfig cfg;
  cfg.crop_mode = CropMode::Squash;
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
  EXPECT_EQ(expect_error([&] { decode_image_file(path); }, fragment).rfind(path + ": ", 0), 0u);
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
  expect_error([&] { decode_image_file(d.file("big.jpg"), 255); }, "256 pixels is over the limit of 255");
}

// Found by fuzz_image (tests/fuzz/regressions/image/pnm_huge_width): stb_image, our PNM reader then,
// overflowed an int reading this header's width. PIL's rule: a header number has at most 10 characters.
TEST(DecodeErrors, PnmHeaderNumberTooLong) {
  TempDir d;
  write_file(d.file("x.ppm"), "P6\n4888888888888888888888 3\n255\n" + std::string(36, 'x'));
  expect_decode_error(d.file("x.ppm"), "PNM header's width is over 10 characters");
  write_file(d.file("ok.ppm"), "P6\n# a comment\n4 3\n255\n" + std::string(36, 'x'));
  EXPECT_EQ(decode_image_file(d.file("ok.ppm")).width, 4);
}

// Found by fuzz_image (regressions/image/pgm-16bit-gray.pgm): stb_image converted a 16-bit PGM to RGB as
// if its samples were 8-bit, then read past its buffer. Our reader gives PIL's pixels (16-bit gray is
// clipped at 255, as PIL's mode I is; PilImages.PnmDecodesToPilsPixels covers the rest).
TEST(Decode, SixteenBitPgm) {
  TempDir d;
  write_file(d.file("g.pgm"), std::string("P5\n3 1\n65535\n\x00\x05\x01\x00\xff\xff", 19));
  const Image img = decode_image_file(d.file("g.pgm"));
  ASSERT_EQ(img.width, 3);
  EXPECT_EQ(img.rgb, (std::vector<uint8_t>{5, 5, 5, 255, 255, 255, 255, 255, 255}));
  const std::string crash = VIT_SOURCE_DIR "/tests/fuzz/regressions/image/pgm-16bit-gray.pgm";
  EXPECT_EQ(decode_image_file(crash).width, 4);
}

// stb_image left the pixels a short uncompressed TGA does not hold uninitialised (upstream's
// CVE-2023-45663): refused as truncated, as PIL refuses it; the whole file still decodes.
TEST(DecodeErrors, TruncatedTga) {
  TempDir d;
  std::string tga(18, '\0');
  tga[2] = 2;                      // uncompressed true colour
  tga[12] = 4, tga[14] = 3;        // 4 x 3
  tga[16] = 24, tga[17] = 0x20;    // BGR, top-left origin
  for (int i = 0; i < 12; ++i) tga += std::string("\x10\x20\x30", 3);
  write_file(d.file("whole.tga"), tga);
  const Image img = decode_image_file(d.file("whole.tga"));
  ASSERT_EQ(img.width, 4);
  EXPECT_EQ(std::vector<uint8_t>(img.rgb.begin(), img.rgb.begin() + 3), (std::vector<uint8_t>{0x30, 0x20, 0x10}));
  write_file(d.file("cut.tga"), tga.substr(0, tga.size() - 1));
  expect_decode_error(d.file("cut.tga"), "truncated TGA: 53 bytes where 4x3 needs 54");
}

TEST(DecodeErrors, DamagedPnm) {
  TempDir d;
  const auto expect = [&](const std::string& bytes, const std::string& fragment) {
    write_file(d.file("x.pgm"), bytes);
    expect_decode_error(d.file("x.pgm"), fragment);
  };
  expect(std::string("P5\n4 3\n255\n") + std::string(11, 'x'), "truncated PNM: 11 bytes of pixels where 4x3 needs 12");
  expect(std::string("P5\n4 3\n256\n") + std::string(12, 'x'), "truncated PNM: 12 bytes of pixels where 4x3 needs 24");
  expect("P5\n4 3\n0\n", "PNM maxval 0 is not between 1 and 65535");
  expect("P6\n4 3\n65536\n", "PNM maxval 65536 is not between 1 and 65535");
  expect("P5\n4 -3\n255\n", "PNM header's height \"-3\" is not a number");
  expect("P5\n4 3", "PNM header ends before its maxval");
  expect("P5\n0 3\n255\n", "image has zero size (0x3)");
  expect("P3\n1 1\n255\n1 2 3\n", "PNM P3 (plain text or 1-bit) is not read; binary P5 and P6 are");
  expect("P5\n10001 10001\n255\n", "10001x10001 = 100020001 pixels is over the limit");
  expect("P5\n99999 99999\n255\n", "99999x99999 = 9999800001 pixels is over the limit");
}

// Found by fuzz_image (regressions/image/png-sides-overflow.png): a PNG's IHDR holds 32-bit sides, whose
// product overflowed the pixel-limit check (UBSan) before it could refuse them.
TEST(DecodeErrors, PngSidesWhoseProductOverflows) {
  TempDir d;
  const std::string ihdr = std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16) + std::string("\xF4\xF3\x9F\x44\xF0\x7F\0\0", 8) +
                           std::string("\x08\x06\0\0\0\0\0\0\0", 9);
  write_file(d.file("x.png"), ihdr);
  expect_decode_error(d.file("x.png"), "image of 4109606724x4034854912 = 16581666876719628288 pixels is over the limit");
}

// Found by fuzz_image (regressions/image/png-empty-idat.png): an empty IDAT chunk, which PNG allows, made
// stb_image memcpy into a null buffer (UBSan). Such chunks are dropped first; the pixels are the same.
TEST(Decode, PngWithEmptyIdatChunks) {
  TempDir d;
  const Image img = gradient(13, 7);
  ASSERT_TRUE(stbi_write_png(d.file("a.png").c_str(), 13, 7, 3, img.rgb.data(), 13 * 3));
  std::string png = read_file(d.file("a.png"));
  const size_t idat = png.find("IDAT") - 4;
  const std::string empty("\0\0\0\0IDAT\x35\xAF\x06\x1E", 12);  // length 0, type, CRC-32 of "IDAT"
  write_file(d.file("b.png"), png.substr(0, idat) + empty + png.substr(idat));
  png.insert(png.size() - 12, empty);  // and one after the data, before IEND
  write_file(d.file("c.png"), png);
  EXPECT_EQ(decode_image_file(d.file("b.png")).rgb, img.rgb);
  EXPECT_EQ(decode_image_file(d.file("c.png")).rgb, img.rgb);
}

TEST(DecodeErrors, Directory) {
  TempDir d;
  expect_decode_error(d.path(), "is a directory");
}

// An image cut short between opening and reading (by another process, say): an error for that file.
TEST(DecodeErrors, FileThatShrinksWhileReadIsAnError) {
  TempDir d;
  write_file(d.file("a.bin"), std::string(5000, 'x'));
  expect_error([&] { read_file_bytes(d.file("a.bin"), 1 << 20, [&] { ASSERT_EQ(::truncate(d.file("a.bin").c_str(), 1000), 0); }); },
               "a.bin: the file shrank while it was read: its 5000 bytes needs bytes up to 5000, the file now has 1000");
}

TEST(DecodeErrors, AFilesHeadIsAtMostItsBytesAndAProcFileIsRead) {
  TempDir d;
  write_file(d.file("a.bin"), "0123456789");
  EXPECT_EQ(read_file_head(d.file("a.bin"), 4), "0123");
  EXPECT_EQ(read_file_head(d.file("a.bin"), 100), "0123456789");
  EXPECT_NE(read_file_head("/proc/self/status", 1 << 16).find("VmHWM:"), std::string::npos);  // its size says 0
  ASSERT_EQ(::mkfifo(d.file("f").c_str(), 0600), 0);
  expect_error([&] { read_file_head(d.file("f"), 4); }, "is a FIFO (named pipe), not a regular file: not read");
  expect_error([&] { read_file_head(d.file("none"), 4); }, "none: cannot open: No such file or directory");
}

TEST(DecodeErrors, FifoIsRefusedWithoutWaiting) {
  TempDir d;
  ASSERT_EQ(::mkfifo(d.file("b.jpg").c_str(), 0600), 0);
  expect_decode_error(d.file("b.jpg"), "is a FIFO (named pipe), not a regular file: not read");
}

TEST(DecodeErrors, HugePngGetsTheLimitMessageOrTheDecodersLimit) {
  TempDir d;
  write_png(d.file("small.png"), 4, 4, 3, std::vector<uint8_t>(48, 7));
  std::string bytes = read_file(d.file("small.png"));
  const size_t ihdr = bytes.find("IHDR");
  for (int i = 0; i < 2; ++i)
    for (int b = 0; b < 4; ++b) bytes[ihdr + 4 + size_t(4 * i + b)] = char((20000u >> (24 - 8 * b)) & 0xff);
  write_file(d.file("huge.png"), bytes);
  expect_decode_error(d.file("huge.png"), "20000x20000 = 400000000 pixels is over the limit of 100000000");
  expect_error([&] { decode_image_file(d.file("huge.png"), 500'000'000); },
               "huge.png: PNG of 20000x20000 pixels is too large for the PNG decoder");
}

}  // namespace
}  // namespace vit::test
