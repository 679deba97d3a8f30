// The formats OpenCV's plugin reads for us (WebP, TIFF, JPEG 2000), PGM/PPM and paletted BMP against PIL's
// pixels, EXIF orientation against PIL's ImageOps.exif_transpose, and their errors: the files and PIL's
// answers are written at test time by tests/pil_images.py with Debian's python3 (python3-pil). Videos: a
// lossless clip the test writes with OpenCV from sample photos, classified by `vit classify` frame by frame
// and embedded by `vit embed` as the mean of its frames' embeddings.
#include <gtest/gtest.h>

#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#include <stb/stb_image_write.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/image/image.h"
#include "engine/io/files.h"
#include "engine/image/opencv_io.h"
#include "engine/image/orientation.h"
#include "vit/request.h"
#include "vit/vit.h"
#include "cli_util.h"
#include "test_util.h"

namespace vit::test {
namespace {

const std::string kPython = "/usr/bin/python3";

// PIL's decoded pixels from NAME.rgb.
Image pil_pixels(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  Image img;
  f >> img.width >> img.height;
  f.get();
  img.rgb.resize(size_t(img.width) * size_t(img.height) * 3);
  f.read(reinterpret_cast<char*>(img.rgb.data()), std::streamsize(img.rgb.size()));
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  return img;
}

class PilImages : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const std::string cmd = kPython + " " + VIT_SOURCE_DIR "/tests/pil_images.py " + dir_->path() + " 2>&1";
    ok_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (ok_) return;
    if (in_ci()) FAIL() << "CI=true but " << kPython << " with PIL (python3-pil) could not write the test images";
    GTEST_SKIP() << kPython << " with PIL (python3-pil) is needed to write the test images; skipping";
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  // Our decode of each file equals PIL's, byte for byte.
  static void expect_pils_pixels(const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      SCOPED_TRACE(name);
      const Image ours = decode_image_file(file(name));
      const Image pil = pil_pixels(file(name) + ".rgb");
      ASSERT_EQ(ours.width, pil.width);
      ASSERT_EQ(ours.height, pil.height);
      EXPECT_TRUE(ours.rgb == pil.rgb) << "pixels differ from PIL's";
    }
  }
  static TempDir* dir_;
  static bool ok_;
};
TempDir* PilImages::dir_ = nullptr;
bool PilImages::ok_ = false;

TEST_F(PilImages, OpenCvFormatsDecodeToPilsPixels) {
  expect_pils_pixels({"lossless.webp", "lossy.webp", "rgba.webp", "raw.tif", "lzw.tif", "deflate.tif", "gray.tif",
                      "rgba.tif", "lossless.jp2"});
}

// Beyond OpenCV's own reading: an animated WebP's first frame (opaque, and lossy with transparency), a
// float TIFF (PIL's mode F, clipped and truncated to 8 bits), 16-bit RGB TIFF (PIL's high byte).
TEST_F(PilImages, AnimatedWebpFloatAnd16BitTiffDecodeToPilsPixels) {
  expect_pils_pixels({"anim.webp", "anim_rgba.webp", "float.tif", "rgb16.tif"});
}

// 16-bit gray TIFF keeps its picture as 16-bit PNG does (the high byte), where PIL clips it at 255 (see
// the README); 3-channel float TIFF, which PIL cannot open, is refused saying what it holds.
TEST_F(PilImages, Gray16TiffTakesTheHighByteAndFloatRgbTiffIsRefused) {
  const Image ours = decode_image_file(file("gray16.tif"));
  const Image want = pil_pixels(file("gray16.tif.rgb16"));
  ASSERT_EQ(ours.width, want.width);
  EXPECT_TRUE(ours.rgb == want.rgb);
  expect_error([&] { decode_image_file(file("rgb_float.tif")); },
               "TIFF of 3 channels of 32-bit floating-point samples: not supported");
}

// Binary PGM/PPM (our reader, pnm.h): PIL's own files, other maxvals with samples above them, 16-bit
// samples (16-bit gray clipped at 255 as PIL's mode I is), comments inside the header.
TEST_F(PilImages, PnmDecodesToPilsPixels) {
  expect_pils_pixels({"p6.ppm", "p5.pgm", "p5_16.pgm", "p6_1000.ppm", "p5_1000.pgm", "p5_15.pgm", "p6_100.ppm",
                      "p6_comments.ppm"});
}

// Paletted BMPs (stb_image) whose pixels index past the palette: PIL's gray ramp there, not stb's stack.
TEST_F(PilImages, PalettedBmpDecodesToPilsPixels) {
  expect_pils_pixels({"p8_short.bmp", "p4_short.bmp", "p1_short.bmp", "p8_full.bmp"});
}

// Without --exif-transpose every format keeps its pixels as stored, as timm's PIL pipeline does; with it,
// PIL's exif_transpose, for all 8 orientations.
TEST_F(PilImages, ExifOrientationIsIgnoredUnlessAskedAndThenMatchesPil) {
  std::vector<std::string> names{"o6.png", "o8.webp", "o3.tif"};
  for (int o = 1; o <= 8; ++o) names.push_back("o" + std::to_string(o) + ".jpg");
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const Image stored = decode_image_file(file(name));
    const Image pil = pil_pixels(file(name) + ".rgb");
    EXPECT_EQ(stored.width, pil.width);
    EXPECT_TRUE(stored.rgb == pil.rgb) << "as stored: pixels differ from PIL's";
    const Image turned = decode_image_file(file(name), kDefaultMaxPixels, /*exif_transpose=*/true);
    const Image pil_turned = pil_pixels(file(name) + ".exif.rgb");
    ASSERT_EQ(turned.width, pil_turned.width);
    ASSERT_EQ(turned.height, pil_turned.height);
    EXPECT_TRUE(turned.rgb == pil_turned.rgb) << "exif_transpose: pixels differ from PIL's";
  }
}

// The flag end to end: `vit classify --exif-transpose` on an EXIF-turned JPEG, WebP and TIFF gives the
// logits of PIL's turned pixels (as PNG); without the flag, those of the pixels as stored.
TEST_F(PilImages, ClassifyExifTransposeFlag) {
  REQUIRE_SHARED_DATA();
  const std::string model = "--model " + shared_data() + "/models/deit_tiny_patch16_224.fb_in1k";
  std::string files, turned_pngs, stored_pngs;
  for (const char* name : {"o6.jpg", "o8.webp", "o3.tif", "o5.jpg"}) {
    files += " " + file(name);
    for (const char* kind : {".exif", ""}) {
      const Image px = pil_pixels(file(name) + kind + ".rgb");
      const std::string png = file(name) + kind + ".png";
      ASSERT_TRUE(stbi_write_png(png.c_str(), px.width, px.height, 3, px.rgb.data(), px.width * 3));
      (*kind ? turned_pngs : stored_pngs) += " " + png;
    }
  }
  const auto logits = [&](const std::string& args, const std::string& out) {
    const Result r = run_vit("classify " + model + " --save-logits " + file(out) + " " + args);
    EXPECT_EQ(r.code, 0) << r.err;
    return SafeTensors(file(out)).to_f32("logits");
  };
  EXPECT_LE(max_abs_diff(logits("--exif-transpose" + files, "t.safetensors"), logits(turned_pngs, "tp.safetensors")), 1e-5f);
  EXPECT_LE(max_abs_diff(logits(files, "s.safetensors"), logits(stored_pngs, "sp.safetensors")), 1e-5f);
}

TEST_F(PilImages, PixelLimitRefusesOpenCvFormats) {
  // 97 x 61 = 5917 pixels. The limit reaches OpenCV once per process, when its plugin is loaded, so a
  // smaller limit than the first caller's is still checked on the decoded size.
  for (const char* name : {"lossless.webp", "raw.tif", "lossless.jp2"}) {
    SCOPED_TRACE(name);
    expect_error([&] { decode_image_file(file(name), 5000); }, "over the limit of 5000");
  }
}

// In a fresh process the limit reaches OpenCV before its first decode: it refuses from the header.
TEST_F(PilImages, PixelLimitReachesOpenCvInAFreshProcess) {
  REQUIRE_SHARED_DATA();
  const Result r = run_vit("classify --model " + shared_data() + "/models/deit_tiny_patch16_224.fb_in1k --json " +
                           "--max-pixels 5000 " + file("lossless.webp") + " " + file("raw.tif"));
  EXPECT_EQ(r.code, 1) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (const auto& line : lines)
    EXPECT_EQ(line["error"], "image is over the limit of 5000 pixels (--max-pixels; OpenCV refused it from its "
                             "header); not decoded") << line;
}

TEST_F(PilImages, DamagedOpenCvFormatsAreErrorsNamingTheFile) {
  for (const char* name : {"lossless.webp", "lzw.tif", "lossless.jp2"}) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = read_file_bytes(file(name), 1 << 24);
    for (size_t keep : {size_t(16), bytes.size() / 2}) {
      const std::string msg = expect_error(
          [&] { decode_image(bytes.data(), keep, "cut." + std::string(name)); }, "cut." + std::string(name));
      EXPECT_NE(msg.find("cannot decode"), std::string::npos) << msg;
    }
  }
}

TEST(OpenCvFormats, RecognisedByContentOnly) {
  const auto is = [](const std::string& bytes) {
    const char* f = opencv_image_format(image_format(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    return std::string(f ? f : "");
  };
  EXPECT_EQ(is(std::string("RIFF\x10\0\0\0WEBPVP8L", 16)), "WebP");
  EXPECT_EQ(is(std::string("II*\0\x08\0\0\0", 8)), "TIFF");
  EXPECT_EQ(is(std::string("MM\0*\0\0\0\x08", 8)), "TIFF");
  EXPECT_EQ(is(std::string("\0\0\0\x0CjP  \r\n\x87\n", 12)), "JPEG 2000");
  EXPECT_EQ(is(std::string("\xFF\x4F\xFF\x51", 4)), "JPEG 2000");
  EXPECT_EQ(is("RIFF\x10\0\0\0WAVE"), "");                       // a RIFF that is not WebP
  EXPECT_EQ(is(std::string("\x76\x2f\x31\x01", 4)), "");          // OpenEXR: never handed to OpenCV
  EXPECT_EQ(is(std::string(128, '\0') + "DICM"), "");             // DICOM (GDCM): neither
  EXPECT_EQ(is("II*"), "");                                       // too short
}

// The orientation parser sees whatever a file holds: malformed EXIF blocks mean "as stored".
int orientation_of(const std::string& bytes) {
  const auto* d = reinterpret_cast<const uint8_t*>(bytes.data());
  return exif_orientation(d, bytes.size(), image_format(d, bytes.size()));
}

TEST(ExifOrientation, MalformedBlocksAreAsStored) {
  const std::string jpeg_app1 = std::string("\xFF\xD8\xFF\xE1\x00\x10" "Exif\0\0" "II*\0\xFF\xFF\xFF\x7F", 20);
  EXPECT_EQ(orientation_of(jpeg_app1), 1);
  const std::string huge_len = std::string("\xFF\xD8\xFF\xE1\xFF\xFF" "Exif\0\0", 12);
  EXPECT_EQ(orientation_of(huge_len), 1);
  // IFD0 with one entry: orientation 6 (SHORT), then the same with a value out of range.
  std::string tiff = std::string("II*\0\x08\0\0\0\x01\0\x12\x01\x03\0\x01\0\0\0\x06\0\0\0\0\0\0\0", 26);
  std::string app1 = std::string("\xFF\xD8\xFF\xE1", 4) + char(0) + char(2 + 6 + tiff.size()) +
                     std::string("Exif\0\0", 6) + tiff;
  EXPECT_EQ(orientation_of(app1), 6);
  app1[app1.size() - 8] = 9;
  EXPECT_EQ(orientation_of(app1), 1);
}

TEST(ExifOrientation, TurnsAsPilNamesThem) {
  Image img;  // 3 x 2: pixel value = 10 * y + x in the red channel
  img.width = 3;
  img.height = 2;
  img.rgb.assign(18, 0);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) img.rgb[size_t(y * 3 + x) * 3] = uint8_t(10 * y + x);
  const auto red = [](const Image& i) {
    std::vector<int> v;
    for (size_t k = 0; k < i.rgb.size(); k += 3) v.push_back(i.rgb[k]);
    return v;
  };
  EXPECT_EQ(red(apply_orientation(img, 1)), (std::vector<int>{0, 1, 2, 10, 11, 12}));
  EXPECT_EQ(red(apply_orientation(img, 2)), (std::vector<int>{2, 1, 0, 12, 11, 10}));   // mirrored
  EXPECT_EQ(red(apply_orientation(img, 3)), (std::vector<int>{12, 11, 10, 2, 1, 0}));   // half turn
  EXPECT_EQ(red(apply_orientation(img, 4)), (std::vector<int>{10, 11, 12, 0, 1, 2}));   // flipped
  const Image six = apply_orientation(img, 6);  // a quarter turn clockwise: 2 x 3
  EXPECT_EQ(six.width, 2);
  EXPECT_EQ(red(six), (std::vector<int>{10, 0, 11, 1, 12, 2}));
  EXPECT_EQ(red(apply_orientation(img, 8)), (std::vector<int>{2, 12, 1, 11, 0, 10}));  // counter-clockwise
}

TEST(VideoFlags, BadValuesAreUsageErrorsNamingTheFlag) {
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--every 0", "--every: 0 is out of range (1 to 1073741824)"},
           {"--fps 0", "--fps: 0 is out of range (0.001 to 1000)"},
           {"--fps abc", "--fps: 'abc' is not a number"},
           {"--every 2 --fps 1", "--every excludes --fps"}}) {
    const Result r = run_vit("classify " + args + " clip.mp4");
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}

// A clip of six sample photos, one per frame at 2 frames/s, 320x240, FFV1 in Matroska (lossless), and
// each frame's pixels as a PNG: what `vit classify` on the video must agree with.
class Video : public ::testing::Test {
 protected:
  static constexpr int kFrames = 6, kWidth = 320, kHeight = 240;
  void SetUp() override {
    REQUIRE_SHARED_DATA();
    std::vector<std::string> photos;
    for (const auto& e : std::filesystem::directory_iterator(shared_data() + "/images/imagenet-samples"))
      photos.push_back(e.path().string());
    std::sort(photos.begin(), photos.end());
    cv::VideoWriter writer(clip(), cv::CAP_FFMPEG, cv::VideoWriter::fourcc('F', 'F', 'V', '1'), 2.0,
                           cv::Size(kWidth, kHeight));
    ASSERT_TRUE(writer.isOpened()) << "OpenCV cannot write FFV1 in Matroska here";
    for (int i = 0; i < kFrames; ++i) {
      const Image photo = decode_image_file(photos[size_t(i) * 40]);
      const cv::Mat rgb(photo.height, photo.width, CV_8UC3, const_cast<uint8_t*>(photo.rgb.data()));
      cv::Mat small, bgr;
      cv::resize(rgb, small, cv::Size(kWidth, kHeight), 0, 0, cv::INTER_AREA);
      ASSERT_TRUE(stbi_write_png(frame_png(i).c_str(), kWidth, kHeight, 3, small.data, kWidth * 3));
      cv::cvtColor(small, bgr, cv::COLOR_RGB2BGR);
      writer.write(bgr);
      frames_.push_back(small.clone());
    }
    writer.release();
  }
  std::string clip() const { return dir_.file("clip.mkv"); }
  std::string frame_png(int i) const { return dir_.file("frame" + std::to_string(i) + ".png"); }
  std::string model() const { return "--model " + shared_data() + "/models/deit_tiny_patch16_224.fb_in1k"; }
  // The clip cut to 60 % (cut.mkv: it stops early) and a text file named .mp4 (no video at all).
  struct BrokenVideos {
    std::string cut, fake;
  };
  BrokenVideos broken_videos() const {
    const BrokenVideos b{dir_.file("cut.mkv"), dir_.file("notes.mp4")};
    std::filesystem::copy_file(clip(), b.cut);
    std::filesystem::resize_file(b.cut, std::filesystem::file_size(clip()) * 6 / 10);
    std::ofstream(b.fake) << "not a video";
    return b;
  }
  TempDir dir_;
  std::vector<cv::Mat> frames_;  // RGB
};

TEST_F(Video, TheClipHoldsThePhotosExactly) {
  cv::VideoCapture cap(clip(), cv::CAP_FFMPEG);
  ASSERT_TRUE(cap.isOpened());
  cv::Mat bgr, rgb;
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_TRUE(cap.read(bgr)) << "frame " << i;
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    EXPECT_EQ(cv::norm(rgb, frames_[size_t(i)], cv::NORM_INF), 0) << "frame " << i << " is not lossless";
  }
  EXPECT_FALSE(cap.read(bgr));
}

TEST_F(Video, EachFrameClassifiedAsItsPhoto) {
  const Result v = run_vit("classify " + model() + " --every 1 --json --save-logits " + dir_.file("v.safetensors") +
                           " " + clip());
  ASSERT_EQ(v.code, 0) << v.err;
  std::string pngs;
  for (int i = 0; i < kFrames; ++i) pngs += " " + frame_png(i);
  const Result p = run_vit("classify " + model() + " --save-logits " + dir_.file("p.safetensors") + pngs);
  ASSERT_EQ(p.code, 0) << p.err;
  const auto lines = json_lines(v.out);
  ASSERT_EQ(lines.size(), size_t(kFrames));
  for (int i = 0; i < kFrames; ++i) {
    EXPECT_EQ(lines[size_t(i)]["file"], clip());
    EXPECT_EQ(lines[size_t(i)]["frame"], i);
    EXPECT_NEAR(lines[size_t(i)]["time_s"].get<double>(), 0.5 * i, 1e-6);
  }
  SafeTensors vs(dir_.file("v.safetensors")), ps(dir_.file("p.safetensors"));
  EXPECT_LE(max_abs_diff(vs.to_f32("logits"), ps.to_f32("logits")), 1e-5f);
  EXPECT_EQ(vs.metadata().at("frames"), "[0,1,2,3,4,5]");
  EXPECT_EQ(vs.metadata().at("times_s"), "[0.000000,0.500000,1.000000,1.500000,2.000000,2.500000]");
  EXPECT_EQ(ps.metadata().count("frames"), 0u);
}

TEST_F(Video, SampledOncePerSecondByDefaultOrByFpsOrEvery) {
  const auto frames = [&](const std::string& flags) {
    const Result r = run_vit("classify " + model() + " --json -k 1 " + flags + " " + clip());
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<int> out;
    for (const auto& j : json_lines(r.out)) out.push_back(j["frame"].get<int>());
    return out;
  };
  EXPECT_EQ(frames(""), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(frames("--fps 2"), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(frames("--fps 0.5"), (std::vector<int>{0, 4}));
  EXPECT_EQ(frames("--every 3"), (std::vector<int>{0, 3}));
  const Result text = run_vit("classify " + model() + " -k 1 --every 5 " + clip());
  EXPECT_NE(text.out.find(clip() + "@5 (2.50 s)\n"), std::string::npos) << text.out;
}

TEST_F(Video, ABrokenVideoAmongGoodFilesLosesNothing) {
  // Cut to 60 %: the frames before the cut are classified, then one error line says how many were read.
  const auto [cut, fake] = broken_videos();
  const Result r = run_vit("classify " + model() + " --json -k 1 --every 1 " + fake + " " + cut + " " + frame_png(0));
  EXPECT_EQ(r.code, 1) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_GE(lines.size(), 4u) << r.out;
  EXPECT_EQ(lines[0]["file"], fake);
  EXPECT_NE(lines[0]["error"].get<std::string>().find("cannot open as a video"), std::string::npos) << lines[0];
  size_t frames = 0;
  while (1 + frames < lines.size() && lines[1 + frames].contains("frame")) ++frames;
  EXPECT_GE(frames, 1u);
  EXPECT_LT(frames, size_t(kFrames));
  const auto& err = lines[1 + frames];
  EXPECT_EQ(err["file"], cut);
  EXPECT_NE(err["error"].get<std::string>().find("stops early"), std::string::npos) << err;
  EXPECT_NE(err["error"].get<std::string>().find(std::to_string(frames) + " sampled frames classified"), std::string::npos) << err;
  EXPECT_EQ(lines.back()["file"], frame_png(0));
  EXPECT_TRUE(lines.back().contains("top"));
}

TEST_F(Video, FoldersGiveVideosOnlyWhenAsked) {
  const Result images_only = run_vit("classify " + model() + " --json -k 1 " + dir_.path());
  EXPECT_EQ(json_lines(images_only.out).size(), size_t(kFrames)) << images_only.out;  // the PNGs
  const Result with_videos = run_vit("classify " + model() + " --json -k 1 --videos " + dir_.path());
  EXPECT_EQ(json_lines(with_videos.out).size(), size_t(kFrames) + 3) << with_videos.out;  // + frames 0, 2, 4
}

// Rows `rows` of a [N, W] tensor, averaged.
std::vector<float> mean_rows(const std::vector<float>& all, size_t width, const std::vector<size_t>& rows) {
  std::vector<double> sum(width);
  for (size_t r : rows)
    for (size_t k = 0; k < width; ++k) sum[k] += all[r * width + k];
  std::vector<float> out;
  for (double v : sum) out.push_back(float(v / double(rows.size())));
  return out;
}

TEST_F(Video, EmbeddingIsTheMeanOfItsFramesEmbeddings) {
  std::string pngs;
  for (int i = 0; i < kFrames; ++i) pngs += " " + frame_png(i);
  const Result p = run_vit("embed " + model() + " --tokens -o " + dir_.file("p.safetensors") + pngs);
  ASSERT_EQ(p.code, 0) << p.err;
  const Result v = run_vit("embed " + model() + " --tokens -o " + dir_.file("v.safetensors") + " --every 1 " + clip() +
                           " " + frame_png(3));
  ASSERT_EQ(v.code, 0) << v.err;
  const Result d = run_vit("embed " + model() + " -o " + dir_.file("d.safetensors") + " " + clip());  // 1 frame/s
  ASSERT_EQ(d.code, 0) << d.err;
  SafeTensors ps(dir_.file("p.safetensors")), vs(dir_.file("v.safetensors")), ds(dir_.file("d.safetensors"));
  const size_t E = size_t(ps.get("embeddings").shape[1]), TD = size_t(ps.get("tokens").shape[1] * ps.get("tokens").shape[2]);
  ASSERT_EQ(vs.get("embeddings").shape, (std::vector<int64_t>{2, int64_t(E)}));
  EXPECT_EQ(vs.metadata().at("files"), nlohmann::json({clip(), frame_png(3)}).dump());
  const auto frames = ps.to_f32("embeddings"), frame_tokens = ps.to_f32("tokens");
  const auto video = vs.to_f32("embeddings"), video_tokens = vs.to_f32("tokens");
  const std::vector<size_t> all{0, 1, 2, 3, 4, 5};
  EXPECT_LE(max_abs_diff(std::vector<float>(video.begin(), video.begin() + long(E)), mean_rows(frames, E, all)), 1e-5f);
  EXPECT_LE(max_abs_diff(std::vector<float>(video_tokens.begin(), video_tokens.begin() + long(TD)),
                         mean_rows(frame_tokens, TD, all)), 1e-5f);
  EXPECT_LE(max_abs_diff(std::vector<float>(video.begin() + long(E), video.end()), mean_rows(frames, E, {3})), 1e-6f);
  // The frames sampled as `vit classify` samples them by default: 0, 2 and 4 of a 2 frames/s clip.
  EXPECT_LE(max_abs_diff(ds.to_f32("embeddings"), mean_rows(frames, E, {0, 2, 4})), 1e-5f);

  // --normalize: the mean, then scaled to unit length (not the mean of unit vectors).
  const Result n = run_vit("embed " + model() + " --normalize --every 1 " + clip());
  ASSERT_EQ(n.code, 0) << n.err;
  const auto lines = json_lines(n.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["file"], clip());
  const auto unit = lines[0]["embedding"].get<std::vector<float>>();
  std::vector<float> mean = mean_rows(frames, E, all);
  double ss = 0;
  for (float x : mean) ss += double(x) * x;
  for (float& x : mean) x = float(x / std::sqrt(ss));
  double norm = 0;
  for (float x : unit) norm += double(x) * x;
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5);
  EXPECT_LE(max_abs_diff(unit, mean), 1e-5f);
}

// A video as a request (Classifier::run): its frames' Results as classify_video gives them, its embedding as
// embed_video's, a video that cannot be read one error; a video request of two paths is refused.
TEST_F(Video, RunAsksAVideoAsTheVideoMethodsDo) {
  ClassifierOptions o;
  o.threads = 1;
  const Classifier c(shared_data() + "/models/deit_tiny_patch16_224.fb_in1k", o);
  const VideoSampling every{1, 1.0};
  std::vector<vit::Result> want;
  c.classify_video(clip(), every, [&](const std::vector<vit::Result>& r) { want.insert(want.end(), r.begin(), r.end()); }, 3);
  const Answer top = c.run(Request::of_video(clip(), Output::Top).with_video(every).with_topk(3));
  ASSERT_EQ(top.results.size(), size_t(kFrames));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(top.results[i].frame, int64_t(i));
    EXPECT_EQ(top.results[i].top[0].index, want[i].top[0].index);
    EXPECT_EQ(top.results[i].top[2].prob, want[i].top[2].prob);
  }
  EmbedOptions eo;
  eo.video = every;
  const Answer mean = c.run(Request::of_video(clip(), Output::Embedding).with_video(every));
  ASSERT_EQ(mean.embeddings.size(), 1u);
  EXPECT_EQ(mean.embeddings[0].embedding, c.embed_video(clip(), eo).embedding);
  const Answer fake = c.run(Request::of_video(broken_videos().fake, Output::Top));
  ASSERT_EQ(fake.results.size(), 1u);
  EXPECT_EQ(fake.results[0].frame, -1);
  EXPECT_NE(fake.results[0].error.find("not a video"), std::string::npos) << fake.results[0].error;
  Request two = Request::of_video(clip(), Output::Top);
  two.paths.push_back(clip());
  expect_error([&] { c.run(two); }, "a video request holds one video, not 2");
  expect_error([&] { c.run(Request::of_video(clip(), Output::Logits)); }, "logits are asked of tensors");
}

// A file that is no video says so as an image would ("empty file", "not a ... file"), not by FFmpeg's
// complaint about the container it guessed from the name ("moov atom not found"); a video container
// FFmpeg cannot read keeps FFmpeg's reason.
TEST_F(Video, FilesThatAreNoVideoSaySo) {
  const std::string empty = dir_.file("empty.mp4"), text = dir_.file("notes.mp4"), mkv = dir_.file("notes.mkv");
  const std::string boxes = dir_.file("boxes.mp4");
  std::ofstream(empty).close();
  std::ofstream(text) << "not a video, just some words";
  std::ofstream(mkv) << "not a video either";
  std::ofstream(boxes) << std::string("\0\0\0\x18" "ftypisom\0\0\x02\0isomiso2", 24);  // an MP4 with no moov
  const Result r = run_vit("classify " + model() + " --json " + empty + " " + text + " " + mkv + " " + boxes);
  EXPECT_EQ(r.code, 1) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_EQ(lines[0]["error"], "empty file, not a video");
  EXPECT_EQ(lines[1]["error"], "cannot open as a video: not a video file (MP4, MKV, AVI, MOV, WebM)");
  EXPECT_EQ(lines[2]["error"], "cannot open as a video: not a video file (MP4, MKV, AVI, MOV, WebM)");
  EXPECT_NE(lines[3]["error"].get<std::string>().find("cannot open as a video: "), std::string::npos) << lines[3];
  EXPECT_EQ(lines[3]["error"].get<std::string>().find("not a video file"), std::string::npos) << lines[3];
  const Result e = run_vit("embed " + model() + " " + empty);
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_EQ(json_lines(e.out).at(0)["error"], "empty file, not a video");
}

TEST_F(Video, ABrokenVideoIsOneEmbeddingErrorAndLosesNothing) {
  const auto [cut, fake] = broken_videos();
  const std::string inputs = " " + frame_png(0) + " " + fake + " " + cut + " " + frame_png(1);
  const Result j = run_vit("embed " + model() + " --every 1" + inputs);
  EXPECT_EQ(j.code, 1) << j.err;
  const auto lines = json_lines(j.out);
  ASSERT_EQ(lines.size(), 4u) << j.out;
  EXPECT_EQ(lines[0]["file"], frame_png(0));
  EXPECT_TRUE(lines[0].contains("embedding"));
  EXPECT_EQ(lines[1]["file"], fake);
  EXPECT_NE(lines[1]["error"].get<std::string>().find("cannot open as a video"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2]["file"], cut);
  EXPECT_NE(lines[2]["error"].get<std::string>().find("stops early"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2]["error"].get<std::string>().find("the video is not embedded"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3]["file"], frame_png(1));
  EXPECT_TRUE(lines[3].contains("embedding"));

  const Result o = run_vit("embed " + model() + " --every 1 -o " + dir_.file("o.safetensors") + inputs);
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_NE(o.err.find("error: " + fake + ": cannot open as a video"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("error: " + cut + ": video stops early"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("2 of 4 inputs embedded, 2 failed"), std::string::npos) << o.err;
  SafeTensors os(dir_.file("o.safetensors"));
  EXPECT_EQ(os.metadata().at("files"), nlohmann::json({frame_png(0), frame_png(1)}).dump());
  std::vector<float> good = lines[0]["embedding"].get<std::vector<float>>();
  const auto second = lines[3]["embedding"].get<std::vector<float>>();
  good.insert(good.end(), second.begin(), second.end());
  EXPECT_LE(max_abs_diff(os.to_f32("embeddings"), good), 1e-6f);
}

// From the library, sampling that takes no frame is refused before any image is embedded, not at the
// first video after the images' work.
TEST_F(Video, EmbedRefusesSamplingThatTakesNoFrameBeforeAnyWork) {
  ClassifierOptions one_by_one;
  one_by_one.batch = 1;  // the hook runs after each image
  const Classifier c(shared_data() + "/models/deit_tiny_patch16_224.fb_in1k", one_by_one);
  for (const VideoSampling bad : {VideoSampling{-1, 1.0}, VideoSampling{0, 0.0}, VideoSampling{0, std::nan("")}}) {
    EmbedOptions o;
    o.video = bad;
    int batches = 0;
    try {
      c.embed({frame_png(0), clip(), frame_png(1)}, o, [&] { return ++batches > 0; });
      ADD_FAILURE() << "embed took every " << bad.every << ", fps " << bad.fps;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("every must be 1 or more, or fps positive"), std::string::npos) << e.what();
    }
    EXPECT_EQ(batches, 0) << "images were embedded before the sampling was refused";
  }
  EmbedOptions good;
  good.video.every = 1;
  EXPECT_EQ(c.embed({frame_png(0), clip()}, good).size(), 2u);
}

TEST_F(Video, EmbedTakesVideosFromFoldersOnlyWhenAsked) {
  EXPECT_EQ(json_lines(run_vit("embed " + model() + " " + dir_.path()).out).size(), size_t(kFrames));
  const auto with_videos = json_lines(run_vit("embed " + model() + " --videos " + dir_.path()).out);
  ASSERT_EQ(with_videos.size(), size_t(kFrames) + 1);
  EXPECT_EQ(with_videos[0]["file"], clip());  // clip.mkv sorts before frame*.png
  EXPECT_TRUE(with_videos[0].contains("embedding"));
}

}  // namespace
}  // namespace vit::test
