// Writes the fuzzers' seed corpora: small valid files of every kind the loaders accept, and mutations
// of them (truncated, header fields changed). Usage: make_corpus OUT_DIR -> OUT_DIR/{image,checkpoint,opencv}/
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>  // needs size_t and FILE first

#include <filesystem>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "model_files.h"

#include <stb/stb_image_write.h>  // implementation: ../stb_image_write.cpp

namespace {

using vit::test::read_file;
using vit::test::write_file;
namespace fs = std::filesystem;

std::vector<uint8_t> pattern(int w, int h, int comp) {
  std::vector<uint8_t> px(size_t(w) * size_t(h) * size_t(comp));
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 37 % 251);
  return px;
}

// libjpeg for what stb cannot write: progressive and CMYK.
void write_jpeg(const std::string& path, int w, int h, J_COLOR_SPACE cs, int comp, bool progressive) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  FILE* f = std::fopen(path.c_str(), "wb");
  jpeg_stdio_dest(&c, f);
  c.image_width = JDIMENSION(w);
  c.image_height = JDIMENSION(h);
  c.input_components = comp;
  c.in_color_space = cs;
  jpeg_set_defaults(&c);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  const std::vector<uint8_t> px = pattern(w, h, comp);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(px.data()) + size_t(c.next_scanline) * size_t(w) * size_t(comp);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

void write_images(const std::string& dir) {
  const auto px = pattern(23, 17, 4);
  stbi_write_jpg((dir + "/rgb.jpg").c_str(), 23, 17, 3, px.data(), 85);
  stbi_write_jpg((dir + "/gray.jpg").c_str(), 17, 23, 1, px.data(), 85);
  write_jpeg(dir + "/progressive.jpg", 31, 9, JCS_RGB, 3, true);
  write_jpeg(dir + "/cmyk.jpg", 12, 12, JCS_CMYK, 4, false);
  stbi_write_png((dir + "/rgb.png").c_str(), 23, 17, 3, px.data(), 23 * 3);
  stbi_write_png((dir + "/gray_alpha.png").c_str(), 9, 5, 2, px.data(), 9 * 2);
  stbi_write_png((dir + "/rgba.png").c_str(), 5, 9, 4, px.data(), 5 * 4);
  stbi_write_bmp((dir + "/rgb.bmp").c_str(), 7, 3, 3, px.data());
  stbi_write_tga((dir + "/rgb.tga").c_str(), 7, 3, 3, px.data());
  // An 8-bit BMP, 4 x 2, with a palette of 2 entries and pixels indexing past it.
  write_file(dir + "/paletted.bmp", std::string("BM\x46\0\0\0\0\0\0\0\x3e\0\0\0(\0\0\0\x04\0\0\0\x02\0\0\0\x01\0\x08\0"
                                                "\0\0\0\0\x08\0\0\0\0\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0"
                                                "\0\0\xff\0\0\xff\0\0\0\x01\x05\xc8\x01\0\x07\x09",
                                                70));
  stbi_write_tga_with_rle = 0;
  stbi_write_tga((dir + "/raw.tga").c_str(), 7, 3, 3, px.data());
  stbi_write_tga_with_rle = 1;
  write_file(dir + "/rgb.ppm", "P6\n4 3\n255\n" + std::string(px.begin(), px.begin() + 36));
  write_file(dir + "/gray16.pgm", "P5\n# 16-bit\n4 3\n1000\n" + std::string(px.begin(), px.begin() + 24));
  write_file(dir + "/rgb15.ppm", "P6\n4 3\n15\n" + std::string(px.begin(), px.begin() + 36));
  // A 1x1 GIF.
  write_file(dir + "/dot.gif", std::string("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04"
                                           "\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;",
                                           43));
  // Mutations: truncations and a frame header claiming a huge size.
  const std::string jpg = read_file(dir + "/rgb.jpg"), png = read_file(dir + "/rgb.png");
  write_file(dir + "/cut.jpg", jpg.substr(0, jpg.size() / 2));
  write_file(dir + "/cut.png", png.substr(0, png.size() / 2));
  std::string big = jpg;
  const size_t sof = big.find("\xFF\xC0");
  if (sof != std::string::npos) big[sof + 5] = big[sof + 7] = char(0x7f);
  write_file(dir + "/huge.jpg", big);
  // EXIF orientation 6 in an APP1 segment, for --exif-transpose.
  const std::string tiff("II*\0\x08\0\0\0\x01\0\x12\x01\x03\0\x01\0\0\0\x06\0\0\0\0\0\0\0", 26);
  const std::string app1 = std::string("\xFF\xE1\x00", 3) + char(2 + 6 + tiff.size()) + std::string("Exif\0\0", 6) + tiff;
  write_file(dir + "/oriented.jpg", jpg.substr(0, 2) + app1 + jpg.substr(2));
}

// WebP (lossy, lossless), TIFF (raw, LZW, gray, 16-bit, float in one and three channels) and JPEG 2000
// files, each also cut in half.
void write_opencv_images(const std::string& dir) {
  std::vector<uint8_t> px = pattern(19, 13, 3);
  const cv::Mat rgb(13, 19, CV_8UC3, px.data()), gray(19, 13, CV_8UC1, px.data());
  cv::Mat wide;
  rgb.convertTo(wide, CV_16UC3, 257);
  const auto save = [&](const std::string& name, const cv::Mat& m, const std::vector<int>& params) {
    std::vector<uint8_t> bytes;
    if (!cv::imencode(name.substr(name.rfind('.')), m, bytes, params)) throw std::runtime_error("cannot write " + name);
    write_file(dir + "/" + name, std::string(bytes.begin(), bytes.end()));
    write_file(dir + "/cut_" + name, std::string(bytes.begin(), bytes.begin() + long(bytes.size() / 2)));
  };
  save("lossy.webp", rgb, {cv::IMWRITE_WEBP_QUALITY, 80});
  save("lossless.webp", rgb, {cv::IMWRITE_WEBP_QUALITY, 101});
  save("raw.tif", rgb, {cv::IMWRITE_TIFF_COMPRESSION, 1});
  save("lzw.tif", rgb, {cv::IMWRITE_TIFF_COMPRESSION, 5});
  save("gray.tif", gray, {});
  save("wide.tif", wide, {});
  cv::Mat floats, floats3;
  gray.convertTo(floats, CV_32FC1, 1.5, -40);  // past 0..255 both ways: clipped as PIL's mode F is
  rgb.convertTo(floats3, CV_32FC3, 1 / 255.0);  // refused: PIL reads one channel of floats only
  save("float.tif", floats, {});
  save("float3.tif", floats3, {});
  std::vector<uint8_t> big = pattern(64, 48, 3);  // OpenJPEG's default 6 resolutions need 32 pixels a side
  save("rgb.jp2", cv::Mat(48, 64, CV_8UC3, big.data()), {});
}

// One fuzz input: checkpoint bytes, config bytes, config length (2 bytes, little-endian).
void write_case(const std::string& path, const std::string& model, const std::string& config) {
  const size_t n = config.size() & 0xffff;
  write_file(path, model + config.substr(0, n) + char(n & 0xff) + char(n >> 8));
}

void write_checkpoints(const std::string& dir) {
  const std::string tmp = dir + "/.tmp";
  fs::create_directories(tmp);
  struct Case {
    const char* name;
    vit::test::TinySpec spec;
  };
  vit::test::TinySpec base;
  base.D = 8, base.depth = 1, base.heads = 2, base.mlp = 16, base.patch = 4, base.img = 8, base.classes = 3;
  std::vector<Case> cases = {{"cls", base}, {"dist", base}, {"avg", base}, {"no_embed_class", base}};
  cases[1].spec.dist_token = true;
  cases[2].spec.class_token = false, cases[2].spec.fc_norm = true;
  cases[3].spec.no_embed_class = true;
  for (const auto& c : cases) {
    vit::test::write_tiny_model(tmp, c.spec, 1);
    const std::string model = read_file(tmp + "/model.safetensors"), config = read_file(tmp + "/config.json");
    write_case(dir + "/" + c.name, model, config);
    write_case(dir + "/" + c.name + "_no_config", model, "");
    write_case(dir + "/" + c.name + "_cut", model.substr(0, model.size() * 2 / 3), config);
  }
  const auto t = vit::test::tiny_vit_tensors(base, 2);
  vit::test::write_tensors(tmp + "/hf.safetensors", vit::test::to_hf_layout(t, base.depth, base.D));
  const nlohmann::json hf_cfg = {{"model_type", "vit"}, {"num_attention_heads", 2}, {"image_size", 8},
                                 {"patch_size", 4}, {"layer_norm_eps", 1e-12}, {"id2label", {{"0", "a"}, {"1", "b"}, {"2", "c"}}}};
  write_case(dir + "/hf", read_file(tmp + "/hf.safetensors"), hf_cfg.dump());
  vit::test::write_tensors(tmp + "/tv.safetensors", vit::test::to_torchvision_layout(t, base.depth));
  write_case(dir + "/torchvision", read_file(tmp + "/tv.safetensors"), "");
  // The layouts of other model code (models/layouts.cpp): slices, transposes and stacked parts.
  auto extra = t;
  vit::test::add_norm_pre(extra, base.D, 3);
  vit::test::add_layer_scale(extra, base.depth, base.D, 4);
  vit::test::write_tensors(tmp + "/oc.safetensors", vit::test::to_openclip_layout(extra, base.depth));
  const nlohmann::json oc_cfg = {{"model_cfg", {{"embed_dim", 3}, {"quick_gelu", true},
                                                {"vision_cfg", {{"width", 8}, {"layers", 1}, {"head_width", 4},
                                                                {"patch_size", 4}, {"image_size", 8}}}}}};
  write_case(dir + "/openclip", read_file(tmp + "/oc.safetensors"), oc_cfg.dump());
  vit::test::write_tensors(tmp + "/dino.safetensors", vit::test::to_hf_dinov2_layout(extra, base.depth, base.D));
  const nlohmann::json dino_cfg = {{"model_type", "dinov2"}, {"num_attention_heads", 2}, {"image_size", 8},
                                   {"patch_size", 4}, {"mlp_ratio", 2}};
  write_case(dir + "/hf_dinov2", read_file(tmp + "/dino.safetensors"), dino_cfg.dump());
  extra["fc_norm.weight"] = extra["norm.weight"];
  extra["fc_norm.bias"] = extra["norm.bias"];
  vit::test::write_tensors(tmp + "/clip.safetensors", vit::test::to_hf_clip_layout(extra, base.depth, base.D));
  const nlohmann::json clip_cfg = {{"model_type", "clip_vision_model"}, {"num_attention_heads", 2},
                                   {"image_size", 8}, {"projection_dim", 3}};
  write_case(dir + "/hf_clip", read_file(tmp + "/clip.safetensors"), clip_cfg.dump());
  vit::test::TinySpec no_cls = base;
  no_cls.class_token = false;
  auto siglip = vit::test::tiny_vit_tensors(no_cls, 5);
  vit::test::add_attn_pool(siglip, base.D, 16, 6);
  vit::test::write_tensors(tmp + "/siglip.safetensors", vit::test::to_hf_siglip_layout(siglip, base.depth, base.D));
  const nlohmann::json siglip_cfg = {{"model_type", "siglip_vision_model"}, {"num_attention_heads", 2},
                                     {"image_size", 8}};
  write_case(dir + "/hf_siglip", read_file(tmp + "/siglip.safetensors"), siglip_cfg.dump());
  fs::remove_all(tmp);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  fs::create_directories(out + "/image");
  fs::create_directories(out + "/checkpoint");
  fs::create_directories(out + "/opencv");
  write_images(out + "/image");
  write_opencv_images(out + "/opencv");
  write_checkpoints(out + "/checkpoint");
  return 0;
}
