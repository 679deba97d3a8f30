// `vit eval --labels-csv FILE`: each photo's class from a CSV file of file,index records (RFC 4180, as
// spreadsheets write it: quoted fields, commas and newlines inside quotes, an optional header).
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace vit::app {

// file -> class index in 0..classes-1. Throws vit::Error naming the file and line for a record that is
// not two fields, an index out of range, malformed quoting, or a file listed twice with two classes.
std::map<std::string, int> read_labels_csv(const std::string& path, int64_t classes);

}  // namespace vit::app
