// NaFlex preprocessing and per-grid position tables without timm: the grids timm's scale search gives
// (a table computed by timm 1.0.31), the patch layout on an image whose resize is the identity, padding
// and bad input; torch's antialiased interpolation of a 16 x 16 table to NaFlex grids against the goldens
// committed in tests/data (tests/data/make_goldens.py), and the cache of those tables, shared by threads.
// The NaFlex row of the family table: its presets timm's shapes, --img-size refused; Hugging Face's
// Siglip2VisionModel refused by name.
// (Patches, coordinates, validity and position rows against timm's own code on photos: test_naflex_timm.cpp.)
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/preprocess/naflex.h"
#include "engine/preprocess/position_tables.h"
#include "model_files.h"
#include "models/network.h"
#include "test_util.h"

namespace vit::test {
namespace {

Image noise(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.resize(size_t(w) * h * 3);
  for (auto& v : img.rgb) v = uint8_t(rng());
  return img;
}

// timm.data.naflex_transforms.get_image_size_for_seq((h, w), 16, N) // 16 for each: width, height, budget,
// rows, cols. Panoramas and portraits, photos' shapes, a pixel, strips both ways, exact fits, budgets of
// one patch and a prime, and large ones.
TEST(NaflexGrid, MatchesTimmsScaleSearch) {
  const int cases[][5] = {
      {3000, 600, 256, 7, 35}, {600, 3000, 256, 35, 7}, {500, 375, 256, 14, 18}, {375, 500, 256, 18, 14},
      {224, 224, 256, 16, 16}, {256, 256, 256, 16, 16}, {1, 1, 256, 7, 7}, {1, 700, 256, 256, 1},
      {700, 1, 256, 1, 256}, {16, 16, 256, 16, 16}, {48, 32, 256, 13, 19}, {20, 12, 256, 12, 20},
      {4000, 3000, 256, 14, 18}, {17, 4096, 256, 241, 1}, {1, 100000, 256, 256, 1}, {100000, 1, 256, 1, 256},
      {333, 177, 256, 12, 21}, {1200, 1600, 256, 18, 14}, {640, 480, 256, 14, 18},
      {3000, 600, 64, 4, 16}, {600, 3000, 64, 16, 4}, {500, 375, 64, 7, 9}, {1, 1, 64, 7, 7}, {1, 700, 64, 64, 1},
      {20, 12, 64, 6, 10}, {17, 4096, 64, 64, 1}, {333, 177, 64, 6, 10},
      {3000, 600, 576, 11, 52}, {224, 224, 576, 24, 24}, {1, 1, 576, 7, 7}, {17, 4096, 576, 288, 2},
      {48, 32, 576, 19, 29}, {333, 177, 576, 18, 32},
      {3000, 600, 1, 1, 1}, {1, 100000, 1, 1, 1}, {224, 224, 1, 1, 1},
      {3000, 600, 7, 1, 5}, {500, 375, 7, 2, 3}, {1, 1, 7, 2, 2}, {17, 4096, 7, 7, 1}, {1200, 1600, 7, 3, 2},
      {3000, 600, 1024, 14, 70}, {1, 700, 1024, 700, 1}, {17, 4096, 1024, 482, 2}, {333, 177, 1024, 23, 44},
      {48, 32, 6, 2, 3}, {32, 48, 6, 3, 2}, {64, 16, 4, 1, 4}, {16, 16, 1, 1, 1}};
  for (const auto& c : cases) {
    const PatchGrid g = naflex_grid(c[0], c[1], 16, c[2]);
    EXPECT_EQ(g, (PatchGrid{c[3], c[4]})) << c[0] << "x" << c[1] << " at " << c[2] << ": got " << g.rows << "x"
                                          << g.cols;
    EXPECT_LE(g.count(), c[2]);
  }
}

// 48 x 32 under a budget of 6 is its own size (2 x 3 patches): each patch is its 16 x 16 pixels, channels
// last, normalised; then padding to the capacity as NaFlexCollator pads.
TEST(NaflexPatches, LayoutCoordinatesValidityAndPadding) {
  const Image img = noise(48, 32, 3);
  NaflexConfig cfg;
  cfg.max_patches = 6;
  cfg.mean = {0.485f, 0.456f, 0.406f};
  cfg.std = {0.229f, 0.224f, 0.225f};
  const int64_t capacity = 9, per = cfg.patch_floats();
  std::vector<float> patches(size_t(capacity * per), -1.f);
  std::vector<int32_t> coords(size_t(2 * capacity), -1);
  std::vector<uint8_t> valid(size_t(capacity), 7);
  const PatchGrid g = naflex_patches(img, cfg, capacity, patches.data(), coords.data(), valid.data());
  ASSERT_EQ(g, (PatchGrid{2, 3}));
  for (int64_t i = 0; i < capacity; ++i) {
    const bool real = i < 6;
    EXPECT_EQ(valid[size_t(i)], real ? 1 : 0) << i;
    EXPECT_EQ(coords[size_t(2 * i)], real ? i / 3 : 0) << i;
    EXPECT_EQ(coords[size_t(2 * i + 1)], real ? i % 3 : 0) << i;
    for (int ky = 0; ky < 16; ++ky)
      for (int kx = 0; kx < 16; ++kx)
        for (int c = 0; c < 3; ++c) {
          const float got = patches[size_t(i * per + (ky * 16 + kx) * 3 + c)];
          if (!real) {
            ASSERT_EQ(got, 0.f) << "padding patch " << i;
            continue;
          }
          const int y = int(i / 3) * 16 + ky, x = int(i % 3) * 16 + kx;
          const uint8_t v = img.rgb[(size_t(y) * 48 + x) * 3 + size_t(c)];
          ASSERT_EQ(got, (float(v) / 255.f - cfg.mean[size_t(c)]) / cfg.std[size_t(c)]) << i << " " << ky << " " << kx;
        }
  }
}

// The resize is PIL's (resize_like_pil) to the grid's pixels: an image smaller than its budget is enlarged.
TEST(NaflexPatches, ResizedAsPilToTheGrid) {
  const Image img = noise(20, 12, 4);
  NaflexConfig cfg;
  PatchGrid g;
  const Image resized = naflex_resize(img, cfg, &g);
  EXPECT_EQ(g, (PatchGrid{12, 20}));
  EXPECT_EQ(resized.width, 320);
  EXPECT_EQ(resized.height, 192);
  EXPECT_EQ(resized.rgb, resize_like_pil(img, 320, 192, Filter::Bicubic).rgb);
}

TEST(NaflexPatches, BadInputIsAnError) {
  NaflexConfig cfg;
  std::vector<float> patches(size_t(300 * cfg.patch_floats()));
  std::vector<int32_t> coords(600);
  std::vector<uint8_t> valid(300);
  expect_error([&] { naflex_patches(noise(100, 20, 1), cfg, 200, patches.data(), coords.data(), valid.data()); },
               "the image's 7x35 patches do not fit in 200");
  expect_error([&] { naflex_patches(Image{}, cfg, 300, patches.data(), coords.data(), valid.data()); },
               "cannot preprocess an empty image (0x0)");
  expect_error([] { naflex_grid(10, 10, 16, 0); }, "NaFlex patch budget must be positive, not 0");
  expect_error([] { naflex_grid(10, 10, -2, 256); }, "NaFlex patch size must be positive, not -2");
  expect_error([] { naflex_grid(1000, 1000, 16, 1 << 30); }, "over the limit of 100000000");
  expect_error([] { naflex_grid(2'000'000'000, 1, 16, 1); }, "image of 2000000000x1 pixels is too large for 1 patches");
}

// torch.nn.functional.interpolate(table, (rows, cols), mode, antialias=True, align_corners=False) of a
// random 16 x 16 x 3 table, as timm's NaFlexEmbeds resizes its position table per grid: a panorama's,
// strips', grids larger and smaller than the table on either side. resample_grid follows torch's float
// arithmetic (weights bit-identical); the sums may round a last bit differently.
TEST(PositionTables, ResampleMatchesTorchAntialiased) {
  SafeTensors gold(test_data("goldens.safetensors"));
  const Golden table = read_golden(gold, "table16");
  ASSERT_EQ(table.shape, (std::vector<int64_t>{16, 16, 3}));
  const int grids[][2] = {{7, 35}, {35, 7}, {1, 256}, {256, 1}, {14, 18}, {16, 16}, {24, 24}, {4, 16}, {3, 5}, {22, 11}};
  for (const Filter f : {Filter::Bilinear, Filter::Bicubic})
    for (const auto& [h, w] : grids) {
      const Golden want = read_golden(gold, std::string("table16_") + filter_name(f) + "_" + std::to_string(h) + "x" +
                                                std::to_string(w));
      const auto got = resample_grid(table.f32.data(), 16, 16, 3, h, w, f);
      EXPECT_LT(max_abs_diff(got, want.f32), 1e-6f) << filter_name(f) << " " << h << "x" << w;
      size_t same = 0;
      for (size_t i = 0; i < got.size(); ++i) same += got[i] == want.f32[i];
      std::printf("%s %dx%d: %.1f%% bit-identical to torch's, largest difference %.3g\n", filter_name(f), h, w,
                  100.0 * double(same) / double(got.size()), double(max_abs_diff(got, want.f32)));
    }
  expect_error([&] { resample_grid(table.f32.data(), 16, 16, 3, 4, 4, Filter::Lanczos); },
               "torch has no antialiased lanczos interpolation");
}

// The cache: the table itself at its own grid, each other grid made once and shared, the least recently
// used dropped past the capacity (a pointer still held stays valid), and many threads asking at once for
// a few grids all get the values resample_grid gives.
TEST(PositionTables, MadeOncePerGridAndShared) {
  std::mt19937 rng(5);
  const std::vector<float> table = random_vector(size_t(16 * 16 * 8), rng);
  PositionTables cache(table, 16, 16, 8, Filter::Bilinear, 2);
  EXPECT_EQ(*cache.get({16, 16}), table);
  EXPECT_EQ(cache.made(), 0u);
  const auto a = cache.get({7, 35});
  EXPECT_EQ(*a, resample_grid(table.data(), 16, 16, 8, 7, 35, Filter::Bilinear));
  EXPECT_EQ(cache.get({7, 35}), a);  // the same object
  EXPECT_EQ(cache.made(), 1u);
  cache.get({35, 7});
  cache.get({7, 35});  // now the most recent
  cache.get({1, 256});  // evicts 35 x 7
  EXPECT_EQ(cache.cached(), 2u);
  EXPECT_EQ(cache.made(), 3u);
  EXPECT_EQ(cache.get({7, 35}), a);
  EXPECT_EQ(cache.made(), 3u);
  cache.get({35, 7});  // made again
  EXPECT_EQ(cache.made(), 4u);

  PositionTables shared(table, 16, 16, 8, Filter::Bicubic);
  const PatchGrid grids[] = {{7, 35}, {14, 18}, {18, 14}, {1, 256}};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const PatchGrid g = grids[(t + i) % 4];
        if (*shared.get(g) != resample_grid(table.data(), 16, 16, 8, g.rows, g.cols, Filter::Bicubic)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(shared.cached(), 4u);
  EXPECT_LE(shared.made(), 4u * 8u);
}

TEST(PositionTables, BadTableOrFilterIsAnError) {
  const std::vector<float> table(16 * 16 * 4);
  expect_error([&] { PositionTables(table, 16, 16, 4, Filter::Nearest); },
               "position tables are resized by antialiased bilinear or bicubic interpolation, not nearest");
  expect_error([&] { PositionTables(table, 16, 15, 4, Filter::Bilinear); },
               "a position table of 1024 values is not 16 x 15 x 4");
  PositionTables ok(table, 16, 16, 4, Filter::Bilinear);
  expect_error([&] { ok.get({0, 3}); }, "no position table for a grid of 0 x 3");
}

// The NaFlex row's presets (`vit bench --arch`): timm 1.0.31's sum(p.numel()) of create_model(arch,
// num_classes=0), its family's settings; a budget of patches instead of an input size.
TEST(NaflexFamily, PresetsAreTimmsShapes) {
  const std::pair<const char*, int64_t> timm[] = {{"naflexvit_base_patch16_siglip", 92930304},
                                                  {"naflexvit_so400m_patch16_siglip", 427888064}};
  for (const auto& [arch, parameters] : timm) {
    SCOPED_TRACE(arch);
    const ViTConfig c = config_for_arch(arch);
    EXPECT_EQ(ViT::parameters(c), parameters);
    EXPECT_EQ(c.family, Family::NaFlex);
    EXPECT_TRUE(c.naflex.on);
    EXPECT_EQ(c.act, Activation::GeluTanh);
    EXPECT_EQ(c.pool.kind, Pool::Map);
    EXPECT_EQ(c.naflex.pos_filter, Filter::Bilinear);
    EXPECT_EQ(c.pos_grid_h, 16);
    EXPECT_EQ(c.pos_grid_w, 16);
    EXPECT_EQ(c.tokens(), 256);  // the budget, SigLIP 2's
    EXPECT_EQ(c.input_floats(), 256 * 16 * 16 * 3);  // its patches; its grid is the Plan's (set_grid)
    expect_error([&] { config_for_arch(arch, 224); }, "--img-size does not apply to " + std::string(arch));
  }
}

// transformers' Siglip2VisionModel (and a whole Siglip2Model's vision_model): its patch embedding a linear
// layer over patches, not SiglipVisionModel's convolution. Refused by name, with or without its config,
// before any tensor is read as a square SigLIP's.
TEST(NaflexFamily, HuggingFaceSiglip2IsRefusedByName) {
  const int64_t D = 32, P = 16;
  std::mt19937 rng(3);
  TensorMap t;
  const auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    t[name] = {shape, random_vector(size_t(n), rng)};
  };
  add("vision_model.embeddings.patch_embedding.weight", {D, 3 * P * P});
  add("vision_model.embeddings.patch_embedding.bias", {D});
  add("vision_model.embeddings.position_embedding.weight", {256, D});
  add("vision_model.encoder.layers.0.layer_norm1.weight", {D});
  add("vision_model.encoder.layers.0.self_attn.q_proj.weight", {D, D});
  add("vision_model.post_layernorm.weight", {D});
  add("vision_model.head.probe", {1, 1, D});
  TempDir d;
  write_tensors(d.file("model.safetensors"), t);
  const std::string why = "Hugging Face Siglip2VisionModel (SigLIP 2 NaFlex in transformers' layout; timm's "
                          "naflexvit_*_siglip folders run) checkpoint: not supported yet";
  expect_error([&] { ViT::load(d.path()); }, why);
  write_file(d.file("config.json"), R"({"model_type": "siglip2_vision_model", "hidden_size": 32, "patch_size": 16,
                                        "num_patches": 256})");
  expect_error([&] { ViT::load(d.path()); }, why);
}

}  // namespace
}  // namespace vit::test
