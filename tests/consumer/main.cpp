// The smallest program on the library: load a model, classify one photo, print its top label; with --text, embed a
// text with a CLIP or SigLIP model's text tower and print its width (so the tokenizers' libraries are linked too).
// tests/package_test.sh builds it against an installed package (find_package) and as a subproject.
#include <vit/request.h>
#include <vit/text.h>
#include <vit/vit.h>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 4 && std::string(argv[1]) == "--text")) {
    std::cerr << "usage: consumer MODEL IMAGE | consumer --text MODEL TEXT\n";
    return 2;
  }
  try {
    if (argc == 4) {
      const vit::TextModel text(argv[2]);
      const vit::TextEmbedding e = text.embed({argv[3]})[0];
      if (!e.error.empty()) {
        std::cerr << e.error << "\n";
        return 1;
      }
      std::cout << e.embedding.size() << "\n";
      return 0;
    }
    const vit::Classifier classifier(argv[1]);
    const vit::Result r = classifier.run(vit::Request::of_files({argv[2]}, vit::Output::Top).with_topk(1)).results[0];
    if (!r.error.empty()) {
      std::cerr << r.file << ": " << r.error << "\n";
      return 1;
    }
    std::cout << r.top[0].label << "\n";
  } catch (const vit::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
