// Input files read with open(O_NONBLOCK) + fstat + pread; see io.h.
#include "engine/io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "vit/error.h"

namespace vit {
namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "is a directory, not a file";
  if (S_ISFIFO(m)) return "is a FIFO (named pipe), not a regular file: not read";
  if (S_ISSOCK(m)) return "is a socket, not a regular file: not read";
  if (S_ISCHR(m) || S_ISBLK(m)) return "is a device, not a regular file: not read";
  return "is not a regular file: not read";
}

}  // namespace

InputFile::InputFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    const int e = errno;
    struct stat link{};
    // A symbolic link to nothing says so, as a folder walk does (find_images), not "no such file".
    if (e == ENOENT && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) throw Error(path, "broken symbolic link");
    throw Error(path, std::string("cannot open: ") + std::strerror(e));
  }
  struct stat st{};
  if (::fstat(fd_, &st) != 0) {
    const int e = errno;
    ::close(fd_);
    throw Error(path, std::string("cannot read: ") + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error(path, kind_of(st.st_mode));
  }
  size_ = uint64_t(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, void* dst, size_t n, const std::string& what) const {
  const size_t got = read_up_to(offset, dst, n, what);
  if (got == n) return;
  struct stat st{};
  const uint64_t now = ::fstat(fd_, &st) == 0 ? uint64_t(st.st_size) : offset + got;
  throw Error(path_, "the file shrank while it was read: " + what + " needs bytes up to " +
                         std::to_string(offset + n) + ", the file now has " + std::to_string(now));
}

size_t InputFile::read_up_to(uint64_t offset, void* dst, size_t n, const std::string& what) const {
  auto* p = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, p + done, n - done, off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(path_, (what.empty() ? std::string("cannot read: ") : "cannot read " + what + ": ") + std::strerror(errno));
    if (got == 0) break;
    done += size_t(got);
  }
  return done;
}

std::string read_file_head(const std::string& path, size_t max_bytes) {
  const InputFile f(path);
  std::string s(max_bytes, '\0');
  s.resize(f.read_up_to(0, s.data(), s.size(), ""));
  return s;
}

std::vector<uint8_t> read_file_bytes(const std::string& path, uint64_t max_bytes,
                                     const std::function<void()>& after_open) {
  InputFile f(path);
  if (f.size() > max_bytes)
    throw Error(path, "file of " + std::to_string(f.size()) + " bytes is over the limit of " +
                          std::to_string(max_bytes) + " for this input; not read");
  if (after_open) after_open();
  std::vector<uint8_t> bytes(size_t(f.size()));
  f.read_at(0, bytes.data(), bytes.size(), "its " + std::to_string(f.size()) + " bytes");
  return bytes;
}

namespace {

// Registered temporaries as fixed buffers, so a signal handler can walk them without allocating.
constexpr int kMaxOutputs = 16;
char g_outputs[kMaxOutputs][4096];
volatile sig_atomic_t g_used[kMaxOutputs];

void register_output(const std::string& path) {
  for (int i = 0; i < kMaxOutputs; ++i)
    if (!g_used[i] && path.size() < sizeof(g_outputs[i])) {
      std::memcpy(g_outputs[i], path.c_str(), path.size() + 1);
      g_used[i] = 1;
      return;
    }
}

void unregister_output(const std::string& path) {
  for (int i = 0; i < kMaxOutputs; ++i)
    if (g_used[i] && path == g_outputs[i]) g_used[i] = 0;
}

}  // namespace

void remove_unfinished_outputs() {
  for (int i = 0; i < kMaxOutputs; ++i)
    if (g_used[i]) ::unlink(g_outputs[i]);
}

OutputFile::OutputFile(const std::string& target) : target_(target) {
  const auto slash = target.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : target.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? target : target.substr(slash + 1);
  if (name.empty()) throw Error(target, "not a file name");
  std::string temp = dir + "." + name + ".XXXXXX";
  fd_ = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd_ < 0) throw Error(target, std::string("cannot create a file in its folder: ") + std::strerror(errno));
  temp_ = temp;
  register_output(temp_);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    unregister_output(temp_);
  }
}

void OutputFile::write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw WriteError(target_, std::string("write failed: ") + std::strerror(errno));
    p += w;
    n -= size_t(w);
  }
}

void OutputFile::commit() {
  // Readable by others as a file written by open(..., 0666) would be (mkstemp makes it 0600).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd_, 0666 & ~mask) != 0 || ::close(fd_) != 0) {
    fd_ = -1;
    throw WriteError(target_, std::string("write failed: ") + std::strerror(errno));
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    throw WriteError(target_, std::string("cannot put the finished file in place: ") + std::strerror(errno));
  unregister_output(temp_);
  temp_.clear();
}

}  // namespace vit
