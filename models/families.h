// Which ViT family a checkpoint belongs to, from its tensor names: the families the engine runs (classic
// ViT and DeiT, DeiT III, DINOv2, CLIP and SigLIP towers, in timm's layout and those of layouts.h) and those
// it recognises but does not run yet, refused by name rather than loaded half-right.
#pragma once
#include <string>

namespace vit {

class SafeTensors;

// The family of a checkpoint the engine cannot run yet ("EVA-02", "BEiT", "CLIP image tower", ...), from
// its tensor names, else "".
std::string unsupported_family(const SafeTensors& st);

// The same from a timm architecture name (a config's "architecture"), else "".
std::string unsupported_family(const std::string& arch);

}  // namespace vit
