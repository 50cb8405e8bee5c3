#pragma once
// A read-only memory map of a whole file. Model weights are read in place from the map, so
// opening a multi-gigabyte model costs no copy and pages in only what is touched.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ignis::model {

class MappedFile {
 public:
  // Maps `path` read-only; throws ignis::Error naming the path when it is missing, not a
  // regular file, or cannot be read or mapped. An empty file maps to an empty span.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data_, static_cast<std::size_t>(size_)}; }

  // The bytes [offset, offset + length); throws "<path>: <what> [a, b) exceeds file size N"
  // when the range does not lie inside the file.
  std::span<const std::byte> subspan(std::uint64_t offset, std::uint64_t length,
                                     std::string_view what = "range") const;

 private:
  void release() noexcept;

  std::string path_;
  const std::byte* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace ignis::model
