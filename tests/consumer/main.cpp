// The smallest program on the library: load a model, classify one photo, print its top label.
// tests/package_test.sh builds it against an installed package (find_package) and as a subproject.
#include <vit/vit.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: consumer MODEL IMAGE\n";
    return 2;
  }
  try {
    const vit::Classifier classifier(argv[1]);
    const vit::Result r = classifier.classify({argv[2]}, 1)[0];
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
