// The safetensors reader: round trip, F16/BF16 widening, and every malformed-file error with its message.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "vit/error.h"
#include "engine/io/safetensors.h"
#include "test_util.h"

namespace vit::test {
namespace {

// A file from a JSON header and raw data, with an optional wrong length field.
std::string make_file(const std::string& header, const std::string& data, int64_t len_override = -1) {
  const uint64_t n = len_override >= 0 ? uint64_t(len_override) : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// The file's bytes must be refused with a message naming the file and containing `fragment`.
void expect_file_error(const std::string& bytes, const std::string& fragment) {
  TempDir d;
  const std::string p = d.file("m.safetensors");
  write_file(p, bytes);
  EXPECT_EQ(expect_error([&] { SafeTensors st(p); }, fragment).rfind(p + ": ", 0), 0u);
}

TEST(SafeTensors, RoundTrip) {
  TempDir d;
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-1.5f};
  write_safetensors(d.file("t.safetensors"), {{"a", {2, 3}, a.data()}, {"b", {1}, b.data()}}, {{"files", "[\"x\"]"}});
  SafeTensors st(d.file("t.safetensors"));
  EXPECT_EQ(st.get("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(st.to_f32("a"), a);
  EXPECT_EQ(st.to_f32("b"), b);
  EXPECT_EQ(st.metadata().at("files"), "[\"x\"]");
}

// Int8 weights (vit quantize) are stored as I8 beside F32 scales, one byte each, read back signed.
TEST(SafeTensors, RoundTripsI8BesideF32) {
  TempDir d;
  const std::vector<int8_t> q = {-127, -1, 0, 1, 64, 127};
  const std::vector<float> s = {0.5f, 2.f};
  write_safetensors(d.file("q.safetensors"), {{"w.q127", {2, 3}, q.data(), DType::I8}, {"w.scale127", {2}, s.data()}});
  SafeTensors st(d.file("q.safetensors"));
  EXPECT_EQ(st.get("w.q127").dtype, DType::I8);
  EXPECT_EQ(st.get("w.q127").nbytes, 6u);
  const std::vector<uint8_t> raw = st.bytes("w.q127");
  EXPECT_EQ(std::vector<int8_t>(raw.begin(), raw.end()), q);
  EXPECT_EQ(st.to_f32("w.q127"), (std::vector<float>{-127, -1, 0, 1, 64, 127}));
  EXPECT_EQ(st.to_f32("w.scale127"), s);
}

TEST(SafeTensors, WidensF16AndBF16) {
  // 1.0, -2.5, 65504 (max f16) and a subnormal in F16; 1.0 and -3.0 in BF16.
  const uint16_t f16[4] = {0x3C00, 0xC100, 0x7BFF, 0x0001};
  const uint16_t bf16[2] = {0x3F80, 0xC040};
  std::string data(reinterpret_cast<const char*>(f16), 8);
  data += std::string(reinterpret_cast<const char*>(bf16), 4);
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]}})";
  TempDir d;
  write_file(d.file("m.safetensors"), make_file(header, data));
  SafeTensors st(d.file("m.safetensors"));
  const auto h = st.to_f32("h");
  EXPECT_EQ(h[0], 1.f);
  EXPECT_EQ(h[1], -2.5f);
  EXPECT_EQ(h[2], 65504.f);
  EXPECT_FLOAT_EQ(h[3], 5.9604645e-08f);
  EXPECT_EQ(st.to_f32("b"), (std::vector<float>{1.f, -3.f}));
}

TEST(SafeTensors, MissingFile) {
  expect_error([] { SafeTensors st("/nonexistent/model.safetensors"); },
               "/nonexistent/model.safetensors: cannot open: No such file or directory");
}

TEST(SafeTensors, TooShort) { expect_file_error("abc", "too short"); }

TEST(SafeTensors, FileShorterThanHeaderSays) {
  expect_file_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd", 1 << 20),
               "file is shorter than its header says");
}

TEST(SafeTensors, HeaderOverLimitRefusedBeforeReading) {
  // A length field of 200 MB in a file of a few bytes: refused by the limit, nothing allocated.
  expect_file_error(make_file("{}", "", int64_t(200) << 20), "over the limit of 100000000");
  expect_file_error(make_file("{}", "", int64_t(1) << 62), "over the limit");
}

TEST(SafeTensors, ShapeProductOverflows) {
  expect_file_error(make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", ""),
               "overflows");
  expect_file_error(make_file(R"({"a":{"dtype":"F32","shape":[3037000500,3037000500,0],"data_offsets":[0,0]}})", ""),
               "overflows");
}

TEST(SafeTensors, HeaderEntriesOfWrongType) {
  expect_file_error(make_file(R"({"a":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", "abcd"), "dtype is not a string");
  expect_file_error(make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"), "not a non-negative");
  expect_file_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "abcd"), "not [begin, end]");
  expect_file_error(make_file(R"([1,2])", ""), "not a JSON object");
}

TEST(SafeTensors, InvalidJson) { expect_file_error(make_file("{not json", ""), "not valid JSON"); }

TEST(SafeTensors, UnknownDtype) {
  expect_file_error(make_file(R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", "x"),
               "unsupported dtype F8_E4M3");
}

TEST(SafeTensors, OffsetsPastEnd) {
  expect_file_error(make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "abcd"),
               "run past the end");
}

TEST(SafeTensors, ShapeDisagreesWithOffsets) {
  expect_file_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"), "needs 8 bytes");
}

TEST(SafeTensors, OffsetsReversed) {
  expect_file_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", "abcdefgh"), "end before they begin");
}

TEST(SafeTensors, Overlap) {
  expect_file_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         "abcdefgh"),
               "overlap");
}

TEST(SafeTensors, MissingTensorNamesIt) {
  TempDir d;
  const float v = 1;
  write_safetensors(d.file("t.safetensors"), {{"a", {1}, &v}});
  SafeTensors st(d.file("t.safetensors"));
  expect_error([&] { st.get("blocks.0.norm1.weight"); }, "t.safetensors: missing tensor blocks.0.norm1.weight");
}

// A model file cut short by another process after its header was read: an error for that tensor,
// naming the file, never a SIGBUS (the file is read, not mapped).
TEST(SafeTensors, FileThatShrinksWhileReadIsAnError) {
  TempDir d;
  const std::vector<float> a(1000, 1.f), b(1000, 2.f);
  write_safetensors(d.file("m.safetensors"), {{"a", {1000}, a.data()}, {"b", {1000}, b.data()}});
  SafeTensors st(d.file("m.safetensors"));
  EXPECT_EQ(st.to_f32("a"), a);
  ASSERT_EQ(::truncate(d.file("m.safetensors").c_str(), off_t(std::filesystem::file_size(d.file("m.safetensors")) - 100)), 0);
  expect_error([&] { st.to_f32("b"); }, "m.safetensors: the file shrank while it was read: tensor b needs bytes up to");
}

TEST(SafeTensors, NotARegularFileIsRefusedUnread) {
  TempDir d;
  ASSERT_EQ(::mkfifo(d.file("pipe.safetensors").c_str(), 0600), 0);
  expect_error([&] { SafeTensors st(d.file("pipe.safetensors")); }, "pipe.safetensors: is a FIFO (named pipe)");
  expect_error([&] { SafeTensors st(d.path()); }, "is a directory");
}

}  // namespace
}  // namespace vit::test
