// The generated models of the text tests (tests/make_text_models.py): tokenizer folders with each reference's tokens
// for a few thousand strings, and shrunk CLIP and SigLIP models with their text towers' reference embeddings; made
// once per build tree beside the vit binary (about a minute), again whenever the generator changes.
#pragma once
#include "reference_models.h"

namespace vit::test {

struct TextModels {
  static GeneratorSpec get() {
    return {"text_models",
            {VIT_SOURCE_DIR "/tests/make_text_models.py", VIT_SOURCE_DIR "/tests/make_layout_models.py"},
            "transformers, open_clip, ftfy, sentencepiece", "", "lacks transformers, open_clip, ftfy or sentencepiece",
            false};
  }
};

}  // namespace vit::test
