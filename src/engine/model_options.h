#pragma once
// How a model is loaded for the engine: device, threads and weight storage. Shared by every
// model family; qk_order concerns only GGUF Llama files, cuda_graphs only the CUDA paths.
#include "engine/linear.h"
#include "ignis/device.h"

namespace ignis::engine {

enum class QkOrder { gguf_interleaved, hf_rotate_half };

struct WeightOptions {
  // Of the linear layers and the embedding table. q8 is the fastest on the CPU (fewest bytes per
  // token); f32 keeps the file's values exactly.
  WeightFormat format = WeightFormat::q8;
  QkOrder qk_order = QkOrder::gguf_interleaved;
};

struct ModelOptions {
  Device device = Device::cpu();
  int threads = 2;  // including the caller's thread
  // On CUDA the linear layers must be f32 (plain fp32 products) or bf16 (fp32 accumulation).
  WeightOptions weights;
  bool cuda_graphs = true;  // capture decode steps as CUDA graphs and replay them
};

}  // namespace ignis::engine
