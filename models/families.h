// Which ViT family a timm architecture or a checkpoint belongs to: one row per family the engine runs,
// with the timm architecture names it takes (an allow-list, built from tests/test_sweep.cpp's comparison of
// every timm name against timm itself: docs/MODELS.md), what its head is and its preset shapes for `vit bench
// --arch`; and the families and variants the engine knows and does not run, refused by name.
#pragma once
#include <cstdint>
#include <string>

namespace vit {

class SafeTensors;
struct ViTConfig;

enum class Family { ViT, DeiT, DeiT3, DINOv2, Clip, SigLIP, BEiT, EVA02, NaFlex };

// What a model's head is: a classifier over labels, or a projection into a joint image-text space (which
// labels nothing without text embeddings); none when the model has no head.
enum class HeadKind { None, Classifier, Projection };
const char* head_kind_name(HeadKind k);  // "none", "classifier", "projection"

struct FamilyRow {
  Family family;
  const char* name;  // what `vit inspect` calls it
  const char* runs;  // the timm architectures of this family the engine runs (a regex over whole names)
  HeadKind head;     // what a head on these models is (a fine-tuned CLIP tower's is a classifier: see head_kind)
  const char* presets;  // those whose whole shape the family's settings give (`vit bench --arch`); null: all
};
const FamilyRow& family_row(Family f);

// The row whose allow-list takes a timm architecture name (without a pretrained tag), null when none does.
const FamilyRow* family_of_arch(const std::string& arch);

// Why an architecture no row takes is refused: "<family> checkpoint: not supported yet (<arch>)" for the
// families and variants the engine knows it does not run, else "architecture '<arch>': not supported".
std::string refusal_of_arch(const std::string& arch);

// A config naming this architecture describes a ViT by its tensors and model_args alone (timm's
// VisionTransformer with its defaults): what weights/export.py writes for a model of one's own.
constexpr const char* kCustomArch = "vit_custom";

// The head of a model of family f with `classes` outputs, whose weights carry the pretrained tag `tag`
// (timm's pretrained_cfg.tag, or the part of a hub folder's name after the dot): a CLIP tower's head is its
// projection, unless the tag says it was fine-tuned on labels (timm's "*_ft_in1k", "*_ft_in12k", ...).
HeadKind head_kind(Family f, int64_t classes, const std::string& tag);

// timm's shape of a named architecture the engine runs (width, depth, heads, MLP, patch, input size, the
// family's settings; a CLIP tower's projection width, else 1000 classes or none), false when it has no
// preset (its row's presets do not take it).
bool arch_preset(const std::string& arch, ViTConfig* c);

// The heads timm gives an architecture the engine runs (what a config naming it without model_args.num_heads
// means), 0 for a name no row takes.
int64_t arch_heads(const std::string& arch);

// The family (or variant) of a checkpoint the engine cannot run yet ("EVA-02 with qk_norm", "CLIP image
// tower" in OpenCLIP's layout, ...), from its tensor names, else "".
std::string unsupported_family(const SafeTensors& st);

}  // namespace vit
