// The texts the commands take for a model's text tower: strings given on the command line and files of one string
// a line, each with the name its errors and warnings use ("--text 2", "queries.txt line 7").
#pragma once
#include <string>
#include <vector>

namespace vit::app {

struct TextInput {
  std::string name;
  std::string text;
};

// The lines of a text file (read without waiting on a FIFO or device; at most 64 MiB), each a string: a line may
// end in CRLF and the file may open with a UTF-8 byte order mark; the newline that ends the last line ends no empty
// string after it. flag names the option in errors ("--text-file queries.txt: no such file").
std::vector<TextInput> read_text_lines(const std::string& path, const std::string& flag);

// `given` (named "FLAG 1", "FLAG 2", ...) then the lines of `file` (when not empty).
std::vector<TextInput> collect_texts(const std::vector<std::string>& given, const std::string& flag,
                                     const std::string& file, const std::string& file_flag);

}  // namespace vit::app
