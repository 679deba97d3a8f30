// The SentencePiece library behind a plugin (libvit_sentencepiece.so), loaded on first use. Debian's libsentencepiece
// carries its own protobuf 3.14 and exports it, which the vit program's protobuf 3.21 (gRPC's) cannot share a symbol
// table with: the plugin is dlopen()ed with RTLD_DEEPBIND, so that each library keeps its own. Only virtual calls
// cross: the subset of sentencepiece::SentencePieceProcessor the tokenizers use, with its method names.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace vit {

// sentencepiece::util::Status: empty when it worked.
struct SentencePieceStatus {
  std::string error;
  bool ok() const { return error.empty(); }
  const std::string& ToString() const { return error; }
};

class SentencePieceProcessor {
 public:
  virtual ~SentencePieceProcessor() = default;
  virtual SentencePieceStatus LoadFromSerializedProto(const std::string& proto) = 0;
  virtual SentencePieceStatus Encode(const std::string& text, std::vector<std::string>* pieces) const = 0;
  virtual SentencePieceStatus Encode(const std::string& text, std::vector<int>* ids) const = 0;
  virtual SentencePieceStatus NBestEncode(const std::string& text, int n,
                                          std::vector<std::vector<std::string>>* pieces) const = 0;
  virtual int GetPieceSize() const = 0;
  virtual float GetScore(int id) const = 0;
  virtual int PieceToId(const std::string& piece) const = 0;
  virtual bool IsUnknown(int id) const = 0;
  virtual std::string IdToPiece(int id) const = 0;
};

// The plugin's entry point: a new processor, or nullptr when `abi` is not the plugin's.
constexpr int kSentencePieceAbi = 1;
extern "C" SentencePieceProcessor* vit_sentencepiece_new(int abi);

// A new processor from the plugin, loaded once per process (where engine/image/opencv_io.h's plugins are); an Error
// naming the plugin when it cannot be loaded. `who`: what needs it, for that error (the model file).
std::unique_ptr<SentencePieceProcessor> new_sentencepiece_processor(const std::string& who);

}  // namespace vit
