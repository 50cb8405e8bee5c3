#pragma once
// The row order of Llama attention q/k weights in GGUF versus Hugging Face checkpoints.
//
// Convention. Within one head of head_dim rows:
//   HF (rotate-half RoPE): row h = half * (head_dim / 2) + i, for half in {0, 1}, i < head_dim/2;
//     RoPE rotates the pair of rows (i, i + head_dim/2) by the angle of frequency i.
//   GGUF (interleaved RoPE): the same pair sits in adjacent rows (2i, 2i + 1), i.e. HF row
//     half * (head_dim/2) + i is stored as GGUF row 2i + half.
// llama.cpp's converter applies that permutation (HF -> GGUF) to attn_q and attn_k so its
// interleaved RoPE computes what the HF model computes. Example, head_dim 4: HF rows
// [r0, r1, r2, r3] (pairs (0,2), (1,3)) are stored in GGUF as [r0, r2, r1, r3].
// Heads are independent; only rows move, each row's contents (any dtype, including quantized
// blocks along the row) are copied unchanged.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::model {

// The GGUF row (within its head) that holds HF row `hf_row` (within the same head).
std::int64_t gguf_row_of_hf_row(std::int64_t hf_row, std::int64_t head_dim);

// src, dst: [n_heads * head_dim rows, bytes per row], row-major raw bytes of equal size.
// GGUF (interleaved) row order -> HF (rotate-half) row order.
void unpermute_qk_rows(std::span<const std::byte> src, std::span<std::byte> dst, std::int64_t n_heads,
                       std::int64_t head_dim);
// HF (rotate-half) row order -> GGUF (interleaved) row order.
void permute_qk_rows(std::span<const std::byte> src, std::span<std::byte> dst, std::int64_t n_heads,
                     std::int64_t head_dim);

// w: [n_heads * head_dim, cols] f32, cols = w.size() / (n_heads * head_dim).
std::vector<float> unpermute_qk_rows(std::span<const float> w, std::int64_t n_heads, std::int64_t head_dim);
std::vector<float> permute_qk_rows(std::span<const float> w, std::int64_t n_heads, std::int64_t head_dim);

}  // namespace ignis::model
