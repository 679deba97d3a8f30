// Reading --labels-csv with libcsv (Debian's libcsv-dev, RFC 4180 in strict mode); see labels_csv.h.
#include "apps/labels_csv.h"

#include <csv.h>

#include <memory>
#include <sstream>
#include <vector>

#include "engine/io/files.h"
#include "vit/error.h"

namespace vit::app {
namespace {

// A file,index record per photo: ImageNet's 50 000 validation photos take 2 MB.
constexpr uint64_t kMaxLabelsCsvBytes = uint64_t(256) << 20;

struct Reader {
  std::string path;
  int64_t classes = 0;
  int line = 0;  // the line being fed to the parser: where a record ends
  std::vector<std::string> fields;
  std::map<std::string, int> by_file;
  std::map<std::string, int> line_of;  // where each file was first listed
  bool first = true;

  void record() {
    const std::vector<std::string> f = std::move(fields);
    fields.clear();
    const bool header = first && f.size() == 2 && f[0] == "file";
    first = false;
    if (header || (f.size() == 1 && f[0].empty())) return;  // a header, or a blank line
    const std::string where = "line " + std::to_string(line);
    if (f.size() != 2)
      throw Error(path, where + " is not file,index (" + std::to_string(f.size()) + " fields)");
    size_t used = 0;
    long index = -1;
    try {
      index = std::stol(f[1], &used);
    } catch (const std::exception&) {
    }
    if (used == 0 || used != f[1].size() || index < 0 || index >= classes)
      throw Error(path, where + ": '" + f[1] + "' is not a class index (0 to " + std::to_string(classes - 1) + ")");
    const auto [it, fresh] = by_file.emplace(f[0], int(index));
    if (!fresh && it->second != int(index))
      throw Error(path, where + ": " + f[0] + " is class " + std::to_string(index) + " here, but class " +
                            std::to_string(it->second) + " on line " + std::to_string(line_of[f[0]]));
    if (fresh) line_of[f[0]] = line;
  }
};

void on_field(void* s, size_t n, void* ctx) {
  static_cast<Reader*>(ctx)->fields.emplace_back(static_cast<const char*>(s), n);
}
void on_record(int, void* ctx) { static_cast<Reader*>(ctx)->record(); }

}  // namespace

std::map<std::string, int> read_labels_csv(const std::string& path, int64_t classes) {
  const std::vector<uint8_t> bytes = read_file_bytes(path, kMaxLabelsCsvBytes);  // no FIFO or device
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  csv_parser p{};
  if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) != 0) throw Error(path, "cannot start the CSV parser");
  const std::unique_ptr<csv_parser, void (*)(csv_parser*)> owned(&p, csv_free);
  Reader r;
  r.path = path;
  r.classes = classes;
  const auto fail = [&] {
    throw Error(path, "line " + std::to_string(r.line) + ": not CSV: " + csv_strerror(csv_error(&p)));
  };
  for (std::string line; std::getline(in, line);) {
    ++r.line;
    line += '\n';
    if (csv_parse(&p, line.data(), line.size(), on_field, on_record, &r) != line.size()) fail();
  }
  if (csv_fini(&p, on_field, on_record, &r) != 0) fail();
  return std::move(r.by_file);
}

}  // namespace vit::app
