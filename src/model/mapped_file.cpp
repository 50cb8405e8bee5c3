#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "ignis/error.h"
#include "model/checked_math.h"

namespace ignis::model {

namespace {

[[noreturn]] void fail_errno(const std::string& path, const char* action) {
  throw Error(detail::concat("cannot ", action, " '", path, "': ", std::strerror(errno)));
}

// Closes the descriptor on every path out of the constructor; the map outlives it.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  FdGuard guard{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (guard.fd < 0) fail_errno(path, "open");
  struct stat st {};
  if (::fstat(guard.fd, &st) != 0) fail_errno(path, "stat");
  if (!S_ISREG(st.st_mode)) throw Error(detail::concat("cannot map '", path, "': not a regular file"));
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ == 0) return;  // mmap rejects a zero length; an empty span is the honest answer
  void* p = ::mmap(nullptr, static_cast<std::size_t>(size_), PROT_READ, MAP_PRIVATE, guard.fd, 0);
  if (p == MAP_FAILED) fail_errno(path, "mmap");
  data_ = static_cast<const std::byte*>(p);
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), static_cast<std::size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

std::span<const std::byte> MappedFile::subspan(std::uint64_t offset, std::uint64_t length,
                                               std::string_view what) const {
  if (!range_fits(offset, length, size_)) {
    // offset + length may wrap; print it as the sum it claims to be only when it does not.
    const auto end = checked_add(offset, length);
    throw Error(detail::concat(path_, ": ", what, " [", offset, ", ",
                               end ? std::to_string(*end) : std::string("overflow"), ") exceeds file size ",
                               size_));
  }
  return bytes().subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(length));
}

}  // namespace ignis::model
