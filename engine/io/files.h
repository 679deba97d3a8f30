// Reading input files so that nothing a user's folder holds can hang or kill a run: anything that is
// not a regular file (a FIFO, a device, a folder) is refused before it is read (opened without blocking,
// then checked), and a file that shrinks while it is read is an error for that file, never a signal
// (files are read, not mapped).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vit {

// An open regular file, closed when it dies. Throws vit::Error naming the path and the problem.
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  uint64_t size() const { return size_; }  // when opened
  // Exactly n bytes at offset into dst; a file that no longer has them is an error ("... shrank ...").
  void read_at(uint64_t offset, void* dst, size_t n, const std::string& what) const;
  // Up to n bytes at offset, fewer where the file ends first (a /proc file says size 0 and still has some);
  // a read error names `what` ("" for the file alone).
  size_t read_up_to(uint64_t offset, void* dst, size_t n, const std::string& what) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole file, refusing one over max_bytes before reading it. after_open runs between opening and
// reading (tests shrink the file there).
std::vector<uint8_t> read_file_bytes(const std::string& path, uint64_t max_bytes,
                                     const std::function<void()>& after_open = {});

// At most max_bytes from the start of a regular file: a file's head (is it one this engine wrote?), or a
// /proc file, whose size says 0. Throws vit::Error as InputFile does.
std::string read_file_head(const std::string& path, size_t max_bytes);

// An output file written in full beside its target (".NAME.XXXXXX" in the same folder) and renamed
// over it by commit(): concurrent writers each leave a complete file, and an interrupted run leaves the
// old file or none, never a torn one. Created at construction, so a folder that cannot take it is an
// error before any work. Until commit() or destruction the temporary is registered for
// remove_unfinished_outputs(), which signal handlers call.
class OutputFile {
 public:
  explicit OutputFile(const std::string& target);
  ~OutputFile();  // removes the temporary unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  void write(const void* data, size_t n);  // throws WriteError
  void commit();                           // throws WriteError
  const std::string& target() const { return target_; }

 private:
  std::string target_, temp_;
  int fd_ = -1;
};

// Unlinks every registered temporary; async-signal-safe (for SIGINT, SIGTERM, SIGPIPE handlers).
void remove_unfinished_outputs();

}  // namespace vit
