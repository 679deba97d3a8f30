// Pictures of attention maps over photos, drawn with OpenCV's core and imgproc (colour map, resizing,
// blending, text) and encoded as PNG by stb_image_write: nothing here loads OpenCV's image codecs.
#pragma once
#include <string>
#include <vector>

#include "engine/image/image.h"
#include "engine/preprocess/preprocess.h"

namespace vit {

// A rectangle in an image's pixels; it may reach past the image's edges.
struct Rect {
  double x, y, w, h;
};

// The part of a w x h image that the model's input shows: the crop of preprocessing mapped back through
// the resize to the image's own pixels.
Rect input_window(int w, int h, const PreprocessConfig& cfg);

// A map over the model's input: rows x cols values (a patch grid), shown from its minimum to its maximum.
struct Heat {
  const float* values;
  int rows, cols;
};

// The whole photo, its longer side scaled to at most max_side (small photos are enlarged to a readable
// size, within max_side): inside the window the map, upsampled bicubically, in the inferno colour map over
// the photo (greyed and dimmed), each pixel's colour weighted by its value, so the hottest places are the
// map's colour and the coldest mostly the photo; outside it, the photo dimmed more; the caption (ASCII; other bytes show as '?')
// on a dark band at the bottom. A photo of extreme proportions is centred on a black picture of at
// least 320x96 (within max_side), so the caption has room.
Image draw_attention(const Image& photo, const Rect& window, const Heat& heat, const std::string& caption,
                     int max_side);

// One panel per map: the window of the photo with that map blended over it and its caption, in a grid
// of at most max_side pixels on its longer side.
Image draw_panels(const Image& photo, const Rect& window, const std::vector<Heat>& heats,
                  const std::vector<std::string>& captions, int max_side);

// An RGB image encoded as PNG (the bytes of a .png file), naming `software` (if given) in a tEXt chunk
// "Software" after the header, as image editors name themselves; throws vit::Error when it cannot be.
std::string encode_png(const Image& img, const std::string& software = "");

}  // namespace vit
