// Reads .safetensors files (the format timm and Hugging Face publish), tensor by tensor with pread (a
// file that shrinks while it is read is an error, not a signal), and writes them.
// Layout: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
// then the raw little-endian data. Every header field is checked against the file before use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/io/files.h"

namespace vit {

enum class DType { F32, F16, BF16, U8, I8 };
const char* dtype_name(DType t);  // "F32", as safetensors writes it

// "[197,192]": how errors print a shape.
std::string shape_string(const std::vector<int64_t>& shape);

struct TensorView {
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t offset;  // in the file
  size_t nbytes;
  int64_t numel() const;
};

class SafeTensors {
 public:
  explicit SafeTensors(const std::string& path);  // throws vit::Error naming path and problem
  SafeTensors(const SafeTensors&) = delete;
  SafeTensors& operator=(const SafeTensors&) = delete;

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorView& get(const std::string& name) const;  // throws when missing
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor's bytes as stored, and the tensor converted to f32 (F16 and BF16 widened), row-major.
  std::vector<uint8_t> bytes(const std::string& name) const;
  std::vector<float> to_f32(const std::string& name) const;

 private:
  std::string path_;
  std::unique_ptr<InputFile> file_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const void* data;  // numel(shape) values of dtype
  DType dtype = DType::F32;
};

// Writes tensors and string metadata; throws vit::Error when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Writes an F32 [rows, cols] tensor given one row at a time, keeping no rows in memory: they go to a
// temporary file and are copied behind the header by finish(), into an OutputFile (io.h) renamed into
// place only when complete. The output's folder is checked by the constructor.
// Several tensors can be written side by side, each getting one row (of any shape) per add().
class RowWriter {
 public:
  using RowShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;  // name, one row's shape
  RowWriter(std::string path, int64_t cols);  // one tensor, named at finish()
  RowWriter(std::string path, RowShapes tensors);
  ~RowWriter();
  RowWriter(const RowWriter&) = delete;
  RowWriter& operator=(const RowWriter&) = delete;
  void add(const float* row);
  void add(const std::vector<const float*>& rows);  // a row of each tensor, in their order
  int64_t rows() const { return rows_; }
  void finish(const std::string& name, const std::map<std::string, std::string>& metadata);
  void finish(const std::map<std::string, std::string>& metadata);

 private:
  OutputFile out_;
  RowShapes tensors_;
  std::vector<int64_t> row_floats_;
  int64_t rows_ = 0;
  std::vector<std::FILE*> rows_files_;
};

}  // namespace vit
