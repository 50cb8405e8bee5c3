#pragma once
// Byte-pair merging of one pre-tokenized piece, on token ids: the merge table maps an adjacent
// pair of ids to its rank and the id of the merged token.
#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ignis::model {

class BpeMerges {
 public:
  // Adds the merge (left, right) -> merged with the next rank; a repeated pair keeps its first
  // (lowest) rank.
  void add(std::int32_t left, std::int32_t right, std::int32_t merged);
  std::size_t size() const { return table_.size(); }

  // byte_ids[b] is the token of the single byte b (-1: none; such bytes are dropped, as the
  // reference tokenizers do when the vocabulary has no unknown token). Appends the ids of the
  // piece to out.
  void encode(std::string_view piece, const std::array<std::int32_t, 256>& byte_ids,
              std::vector<std::int32_t>& out) const;

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t merged;
  };
  static std::uint64_t key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }
  const Merge* find(std::int32_t left, std::int32_t right) const;

  std::unordered_map<std::uint64_t, Merge> table_;
  std::int32_t next_rank_ = 0;
};

}  // namespace ignis::model
