// libvit_sentencepiece.so: sentencepiece_plugin.h's processor on Debian's libsentencepiece.
#include "engine/text/sentencepiece_plugin.h"

#include <sentencepiece_processor.h>

namespace vit {
namespace {

SentencePieceStatus status(const sentencepiece::util::Status& s) { return {s.ok() ? "" : s.ToString()}; }

class Processor : public SentencePieceProcessor {
 public:
  SentencePieceStatus LoadFromSerializedProto(const std::string& proto) override {
    return status(sp_.LoadFromSerializedProto(proto));
  }
  SentencePieceStatus Encode(const std::string& text, std::vector<std::string>* pieces) const override {
    return status(sp_.Encode(text, pieces));
  }
  SentencePieceStatus Encode(const std::string& text, std::vector<int>* ids) const override {
    return status(sp_.Encode(text, ids));
  }
  SentencePieceStatus NBestEncode(const std::string& text, int n,
                                  std::vector<std::vector<std::string>>* pieces) const override {
    return status(sp_.NBestEncode(text, n, pieces));
  }
  int GetPieceSize() const override { return sp_.GetPieceSize(); }
  float GetScore(int id) const override { return sp_.GetScore(id); }
  int PieceToId(const std::string& piece) const override { return sp_.PieceToId(piece); }
  bool IsUnknown(int id) const override { return sp_.IsUnknown(id); }
  std::string IdToPiece(int id) const override { return sp_.IdToPiece(id); }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace
}  // namespace vit

extern "C" __attribute__((visibility("default"))) vit::SentencePieceProcessor* vit_sentencepiece_new(int abi) {
  return abi == vit::kSentencePieceAbi ? new vit::Processor() : nullptr;
}
