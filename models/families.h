// Which ViT family a checkpoint belongs to, from its tensor names: the families the engine runs (classic
// ViT and DeiT, DeiT III, DINOv2, CLIP and SigLIP towers, BEiT, EVA-02, in timm's layout and those of
// layouts.h) and those it recognises but does not run yet, refused by name rather than loaded half-right.
#pragma once
#include <string>

namespace vit {

class SafeTensors;

// The family (or variant) of a checkpoint the engine cannot run yet ("EVA-02 with qk_norm", "CLIP image
// tower" in OpenCLIP's layout, ...), from its tensor names, else "".
std::string unsupported_family(const SafeTensors& st);

// The same from a timm architecture name (a config's "architecture"), else "".
std::string unsupported_family(const std::string& arch);

// timm's BEiT architectures (beit.py: beit_*, beitv2_*) and the EVA-02 ones the engine runs (eva.py:
// eva02_{tiny,small,base,large}_patch14_{224,336,448}, the image classifiers and their backbones).
bool is_beit_arch(const std::string& arch);
bool is_eva02_arch(const std::string& arch);

}  // namespace vit
