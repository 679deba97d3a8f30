// Reads .safetensors files (the format timm and Hugging Face publish) memory-mapped, and writes them.
// Layout: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
// then the raw little-endian data. Every header field is checked against the file before use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace vit {

enum class DType { F32, F16, BF16, U8 };
const char* dtype_name(DType t);  // "F32", as safetensors writes it

// "[197,192]": how errors print a shape.
std::string shape_string(const std::vector<int64_t>& shape);

struct TensorView {
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data;  // points into the mapping; valid while the SafeTensors object lives
  size_t nbytes;
  int64_t numel() const;
};

class SafeTensors {
 public:
  explicit SafeTensors(const std::string& path);  // throws vit::Error naming path and problem
  ~SafeTensors();
  SafeTensors(const SafeTensors&) = delete;
  SafeTensors& operator=(const SafeTensors&) = delete;

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorView& get(const std::string& name) const;  // throws when missing
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor converted to f32 (F16 and BF16 widened), row-major.
  std::vector<float> to_f32(const std::string& name) const;
  // The tensor's data as floats in place, when it is F32 and 4-byte aligned; else nullptr.
  const float* f32_view(const std::string& name) const;
  // Reads the tensor's pages in ahead of use, in one call rather than a fault per page.
  void prefetch(const std::string& name) const;
  // Drops the tensor's pages from this process (the file stays cached): a loaded tensor
  // costs no memory twice.
  void release(const std::string& name) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data;  // F32, numel(shape) values
};

// Writes F32 tensors and string metadata; throws vit::Error when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Writes an F32 [rows, cols] tensor given one row at a time, keeping no rows in memory: they go to a
// temporary file and are copied behind the header by finish(). The output path is opened (and so
// checked) by the constructor.
class RowWriter {
 public:
  RowWriter(std::string path, int64_t cols);
  ~RowWriter();
  RowWriter(const RowWriter&) = delete;
  RowWriter& operator=(const RowWriter&) = delete;
  void add(const float* row);
  int64_t rows() const { return rows_; }
  void finish(const std::string& name, const std::map<std::string, std::string>& metadata);

 private:
  std::string path_;
  int64_t cols_, rows_ = 0;
  std::FILE* rows_file_ = nullptr;
};

}  // namespace vit
