#include <gtest/gtest.h>

#include "ignis/error.h"
#include "model/error_text.h"
#include "model/mapped_file.h"
#include "model/sample_files.h"

namespace ignis::model {
namespace {

using test::Bytes;
using test::TempFile;

TEST(MappedFile, MapsTheWholeFile) {
  const Bytes content{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{250}};
  TempFile file("data.bin", content);
  const MappedFile map(file.path());
  EXPECT_EQ(map.size(), 4u);
  EXPECT_EQ(map.path(), file.path());
  ASSERT_EQ(map.bytes().size(), 4u);
  EXPECT_TRUE(std::equal(content.begin(), content.end(), map.bytes().begin()));
  const auto sub = map.subspan(1, 3, "tail");
  ASSERT_EQ(sub.size(), 3u);
  EXPECT_EQ(sub[2], std::byte{250});
  EXPECT_EQ(map.subspan(4, 0).size(), 0u);
}

TEST(MappedFile, MoveKeepsTheMapping) {
  TempFile file("data.bin", Bytes(100, std::byte{7}));
  MappedFile a(file.path());
  const std::byte* p = a.bytes().data();
  MappedFile b(std::move(a));
  EXPECT_EQ(b.bytes().data(), p);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state is part of the contract
  MappedFile c(file.path());
  c = std::move(b);
  EXPECT_EQ(c.bytes().data(), p);
  EXPECT_EQ(c.bytes()[99], std::byte{7});
}

TEST(MappedFile, EmptyFileIsAnEmptySpan) {
  TempFile file("empty.bin", {});
  const MappedFile map(file.path());
  EXPECT_EQ(map.size(), 0u);
  EXPECT_TRUE(map.bytes().empty());
}

TEST(MappedFile, MissingFileNamesThePath) {
  const std::string path = "/nonexistent/dir/model.gguf";
  EXPECT_ERROR_CONTAINS(MappedFile m(path), "cannot open '" + path + "': No such file");
}

TEST(MappedFile, DirectoryIsRejected) {
  TempFile file("x.bin", {});
  const std::string dir = std::filesystem::path(file.path()).parent_path().string();
  EXPECT_ERROR_CONTAINS(MappedFile m(dir), "'" + dir + "': not a regular file");
}

TEST(MappedFile, SubspanOutOfBoundsThrows) {
  TempFile file("data.bin", Bytes(10));
  const MappedFile map(file.path());
  EXPECT_ERROR_CONTAINS((void)map.subspan(8, 4, "weights"), "weights [8, 12) exceeds file size 10");
  EXPECT_ERROR_CONTAINS((void)map.subspan(11, 0), "range [11, 11) exceeds file size 10");
  // offset + length wraps
  EXPECT_ERROR_CONTAINS((void)map.subspan(1, ~std::uint64_t{0}), "range [1, overflow) exceeds file size 10");
}

}  // namespace
}  // namespace ignis::model
