// ViT checkpoints for the tests and the fuzz corpus, written independently of models/checkpoint.cpp:
// tiny random models in timm's names, and any timm-named tensors renamed to the Hugging Face or
// torchvision layout. No GoogleTest here, so the fuzz corpus generator can use it too.
#pragma once
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace vit::test {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale = 1.f, float offset = 0.f);
void write_file(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);

// A tiny ViT in timm's names, as a name -> (shape, values) map.
struct TinySpec {
  int64_t D = 32, depth = 2, heads = 2, mlp = 64, patch = 8, img = 32, classes = 10;
  bool class_token = true, dist_token = false, no_embed_class = false, fc_norm = false;
};
using TensorMap = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;
TensorMap tiny_vit_tensors(const TinySpec& s, uint32_t seed);
void write_tensors(const std::string& path, const TensorMap& t);
// Writes model.safetensors and a timm config.json (heads, pooling, input size) into dir.
void write_tiny_model(const std::string& dir, const TinySpec& s, uint32_t seed = 1);

// A timm-named checkpoint (depth blocks, width D) in Hugging Face ViTForImageClassification's names,
// q, k and v split; and in torchvision's vit_b_16 names.
TensorMap to_hf_layout(const TensorMap& timm, int64_t depth, int64_t D);
TensorMap to_torchvision_layout(const TensorMap& timm, int64_t depth);
// The timm tensors of the other layouts' features, random: layer scales (blocks.{i}.ls1.gamma, ls2.gamma),
// norm_pre, and SigLIP's attention-pool head (attn_pool.*, MLP width mlp).
void add_layer_scale(TensorMap& t, int64_t depth, int64_t D, uint32_t seed);
void add_norm_pre(TensorMap& t, int64_t D, uint32_t seed);
void add_attn_pool(TensorMap& t, int64_t D, int64_t mlp, uint32_t seed);
// A timm-named checkpoint in the names of OpenCLIP's visual tower (patch embedding and head without
// biases: drop them), Hugging Face's Dinov2Model (q, k, v split; mask_token added), CLIPVisionModelWithProjection
// (fc_norm as post_layernorm) and SiglipVisionModel (no class token; attn_pool as its head).
TensorMap to_openclip_layout(const TensorMap& timm, int64_t depth);
TensorMap to_hf_dinov2_layout(const TensorMap& timm, int64_t depth, int64_t D);
TensorMap to_hf_clip_layout(const TensorMap& timm, int64_t depth, int64_t D);
TensorMap to_hf_siglip_layout(const TensorMap& timm, int64_t depth, int64_t D);
// All tensors of a safetensors file as f32.
TensorMap read_tensors(const std::string& path);

}  // namespace vit::test
