// safetensors reader (pread) and writer; see safetensors.h for the format.
#include "engine/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "vit/error.h"

namespace vit {
namespace {

// Real headers are kilobytes (a few hundred tensors); anything this large is not a checkpoint.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::U8:
    case DType::I8: return 1;
  }
  return 0;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) { man <<= 1; --exp; }
      bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float bf16_to_f32(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::U8: return "U8";
    case DType::I8: return "I8";
  }
  return "?";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// One header entry {dtype, shape, data_offsets}, checked against the data section's size; *begin gets
// its offset in that section.
TensorView parse_entry(const std::string& where, const nlohmann::json& entry, size_t data_size, uint64_t* begin) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    throw Error(where, "entry needs dtype, shape and data_offsets");
  const auto& dt = entry["dtype"];
  if (!dt.is_string()) throw Error(where, "dtype is not a string");
  const std::string d = dt.get<std::string>();
  TensorView t{};
  bool known = false;
  for (DType k : {DType::F32, DType::F16, DType::BF16, DType::U8, DType::I8})
    if (d == dtype_name(k)) t.dtype = k, known = true;
  if (!known) throw Error(where, "unsupported dtype " + d + " (expected F32, F16, BF16, U8 or I8)");
  const auto& sh = entry["shape"];
  if (!sh.is_array()) throw Error(where, "shape is not a list");
  uint64_t bytes_needed = dtype_size(t.dtype);
  for (const auto& v : sh) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      throw Error(where, "shape holds " + v.dump() + ", not a non-negative integer");
    t.shape.push_back(v.get<int64_t>());
    if (__builtin_mul_overflow(bytes_needed, uint64_t(t.shape.back()), &bytes_needed) ||
        bytes_needed > uint64_t(INT64_MAX))
      throw Error(where, "shape " + sh.dump() + " overflows: its size does not fit in 64 bits");
  }
  const auto& off = entry["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    throw Error(where, "data_offsets is not [begin, end]");
  const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
  const std::string span = "data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + "]";
  if (b > e) throw Error(where, span + " end before they begin");
  if (e > data_size)
    throw Error(where, span + " run past the end of the data (" + std::to_string(data_size) + " bytes)");
  t.nbytes = size_t(e - b);
  if (bytes_needed != t.nbytes)
    throw Error(where, "shape " + shape_string(t.shape) + " of " + d + " needs " + std::to_string(bytes_needed) +
                           " bytes, offsets give " + std::to_string(t.nbytes));
  *begin = b;
  return t;
}

}  // namespace

SafeTensors::SafeTensors(const std::string& path) : path_(path), file_(std::make_unique<InputFile>(path)) {
  const uint64_t size = file_->size();
  if (size < 8)
    throw Error(path, "not a safetensors file: " + std::to_string(size) +
                          " bytes, too short for the 8-byte header length");
  uint8_t len[8];
  file_->read_at(0, len, 8, "the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  if (n > kMaxHeaderBytes)
    throw Error(path, "header length " + std::to_string(n) + " bytes is over the limit of " +
                          std::to_string(kMaxHeaderBytes) + " (100 MB); not a safetensors file, or a hostile one");
  if (n == 0 || n > size - 8)
    throw Error(path, "file is shorter than its header says: header length " + std::to_string(n) +
                          ", but the file has " + std::to_string(size - 8) + " bytes after the length field");
  std::string text(size_t(n), '\0');
  file_->read_at(8, text.data(), text.size(), "the header");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw Error(path, "header is not a JSON object");
  const uint64_t data_start = 8 + n;
  const size_t data_size = size_t(size - data_start);
  std::vector<std::pair<size_t, std::string>> spans;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(path, "__metadata__ is not an object");
      for (auto& [k, v] : entry.items()) metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    uint64_t b = 0;
    TensorView t = parse_entry(path + ": tensor " + name, entry, data_size, &b);
    t.offset = data_start + b;
    if (t.nbytes) spans.emplace_back(size_t(b), name);
    tensors_.emplace(name, std::move(t));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    const auto& prev = tensors_.at(spans[i - 1].second);
    if (spans[i - 1].first + prev.nbytes > spans[i].first)
      throw Error(path, "tensors " + spans[i - 1].second + " and " + spans[i].second + " overlap");
  }
}

const TensorView& SafeTensors::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error(path_, "missing tensor " + name);
  return it->second;
}

std::vector<uint8_t> SafeTensors::bytes(const std::string& name) const {
  const TensorView& t = get(name);
  std::vector<uint8_t> out(t.nbytes);
  file_->read_at(t.offset, out.data(), out.size(), "tensor " + name);
  return out;
}

std::vector<float> SafeTensors::to_f32(const std::string& name) const {
  const TensorView& t = get(name);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F32) {  // straight into the result
    file_->read_at(t.offset, out.data(), t.nbytes, "tensor " + name);
    return out;
  }
  const std::vector<uint8_t> raw = bytes(name);
  if (t.dtype == DType::U8 || t.dtype == DType::I8) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = t.dtype == DType::U8 ? float(raw[i]) : float(int8_t(raw[i]));
    return out;
  }
  float (*widen)(uint16_t) = t.dtype == DType::F16 ? f16_to_f32 : bf16_to_f32;
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, raw.data() + 2 * i, 2);
    out[i] = widen(h);
  }
  return out;
}

namespace {
struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
};

// The 8-byte length and the JSON header (padded to 8 bytes) for tensors stored back to back.
std::string header_bytes(const std::vector<Entry>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, shape, dtype] : tensors) {
    uint64_t n = dtype_size(dtype);
    for (int64_t d : shape) n *= uint64_t(d);
    header[name] = {{"dtype", dtype_name(dtype)}, {"shape", shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char(uint8_t(uint64_t(h.size()) >> (8 * i)));
  return out + h;
}
}  // namespace

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<Entry> entries;
  for (const auto& t : tensors) entries.push_back({t.name, t.shape, t.dtype});
  const std::string head = header_bytes(entries, metadata);
  OutputFile out(path);
  out.write(head.data(), head.size());
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    out.write(t.data, size_t(n) * dtype_size(t.dtype));
  }
  out.commit();
}

RowWriter::RowWriter(std::string path, int64_t cols) : RowWriter(std::move(path), RowShapes{{"", {cols}}}) {}

RowWriter::RowWriter(std::string path, RowShapes tensors) : out_(path), tensors_(std::move(tensors)) {
  for (const auto& t : tensors_) {
    int64_t n = 1;
    for (int64_t d : t.second) n *= d;
    row_floats_.push_back(n);
    rows_files_.push_back(std::tmpfile());
    if (!rows_files_.back())
      throw Error(path, std::string("cannot create a temporary file for the rows: ") + std::strerror(errno));
  }
}

RowWriter::~RowWriter() {
  for (std::FILE* f : rows_files_)
    if (f) std::fclose(f);
}

void RowWriter::add(const float* row) { add(std::vector<const float*>{row}); }

void RowWriter::add(const std::vector<const float*>& rows) {
  for (size_t t = 0; t < rows_files_.size(); ++t)
    if (std::fwrite(rows[t], sizeof(float), size_t(row_floats_[t]), rows_files_[t]) != size_t(row_floats_[t]))
      throw WriteError(out_.target(), std::string("cannot write the rows' temporary file: ") + std::strerror(errno));
  ++rows_;
}

void RowWriter::finish(const std::string& name, const std::map<std::string, std::string>& metadata) {
  tensors_[0].first = name;
  finish(metadata);
}

void RowWriter::finish(const std::map<std::string, std::string>& metadata) {
  std::vector<Entry> shapes;
  for (const auto& [name, row] : tensors_) {
    shapes.push_back({name, {rows_}});
    shapes.back().shape.insert(shapes.back().shape.end(), row.begin(), row.end());
  }
  const std::string head = header_bytes(shapes, metadata);
  out_.write(head.data(), head.size());
  std::vector<char> chunk(size_t(1) << 20);
  for (std::FILE* f : rows_files_) {
    if (std::fflush(f) != 0) throw WriteError(out_.target(), std::string("write failed: ") + std::strerror(errno));
    std::rewind(f);
    for (size_t n; (n = std::fread(chunk.data(), 1, chunk.size(), f)) > 0;) out_.write(chunk.data(), n);
    if (std::ferror(f)) throw WriteError(out_.target(), "cannot read back the rows' temporary file");
  }
  out_.commit();
}

}  // namespace vit
