#pragma once
// The GPT-2 forward pass on CUDA, behind Gpt2Model for a CUDA device.
//
// The same design as the CUDA Llama (engine/cuda_llama.h, whose CudaForward interface it
// implements): weights on the GPU, the linear layers f32 (plain fp32 products) or bf16 (fp32
// accumulation), the embedding tables, norms and biases f32; f32 activations and KV cache; linear
// layers through cuBLASLt with their biases in the matmul epilogue (the output projections
// accumulate into the residual), attention through the CUDA attention backend over the cache in
// place, everything else through the ignis ops, all on one stream of the model.
//
// c_attn is one [3 * dim, dim] product. A decode step reads q, k and v straight out of its one
// output row; a prompt's [n, 3 * dim] rows are regrouped into q | k | v blocks by two transposes.
// Decode steps read their token id (the previous step's sampled id) and position (the cache's
// device length, for the learned position table as for the cache append) from device memory, so
// one step is captured once as a CUDA graph and replayed (engine/cuda_graph_step.h).
#include <memory>

#include "engine/cuda_llama.h"
#include "engine/gpt2_config.h"
#include "engine/gpt2_weights.h"

namespace ignis::engine {

// The weights' linear layers must be f32 or bf16. Throws ignis::Error without CUDA.
std::unique_ptr<CudaForward> make_cuda_gpt2(const Gpt2Config& config, const Gpt2Weights& weights,
                                            const CudaForwardOptions& options);

}  // namespace ignis::engine
