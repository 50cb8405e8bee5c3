#include "model/bpe.h"

#include <algorithm>
#include <functional>

namespace ignis::model {

void BpeMerges::add(std::int32_t left, std::int32_t right, std::int32_t merged) {
  table_.try_emplace(key(left, right), Merge{next_rank_, merged});
  ++next_rank_;
}

const BpeMerges::Merge* BpeMerges::find(std::int32_t left, std::int32_t right) const {
  const auto it = table_.find(key(left, right));
  return it == table_.end() ? nullptr : &it->second;
}

void BpeMerges::encode(std::string_view piece, const std::array<std::int32_t, 256>& byte_ids,
                       std::vector<std::int32_t>& out) const {
  // The symbols form a linked list over their original positions; a merge keeps the left
  // symbol and unlinks the right one.
  struct Symbol {
    std::int32_t id;
    std::int32_t prev;
    std::int32_t next;
  };
  std::vector<Symbol> sym;
  sym.reserve(piece.size());
  for (const char c : piece) {
    const std::int32_t id = byte_ids[static_cast<unsigned char>(c)];
    if (id < 0) continue;
    const auto n = static_cast<std::int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  // Candidates ordered by rank, then by position (leftmost first), as the reference does.
  // Entries go stale when a neighbour merges; they are checked when popped.
  struct Candidate {
    std::int32_t rank;
    std::int32_t left;
    std::int32_t right;
    std::int32_t left_id;
    std::int32_t right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::vector<Candidate> heap;
  auto push = [&](std::int32_t left) {
    const std::int32_t right = sym[left].next;
    if (right < 0) return;
    if (const Merge* m = find(sym[left].id, sym[right].id)) {
      heap.push_back({m->rank, left, right, sym[left].id, sym[right].id});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(sym.size()); ++i) push(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = sym[c.left];
    if (left.next != c.right || left.id != c.left_id || sym[c.right].id != c.right_id) continue;
    left.id = find(c.left_id, c.right_id)->merged;
    left.next = sym[c.right].next;
    if (left.next >= 0) sym[left.next].prev = c.left;
    sym[c.right].id = -1;
    if (left.prev >= 0) push(left.prev);
    push(c.left);
  }
  for (std::int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace ignis::model
