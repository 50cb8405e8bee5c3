#include "ignis/stream.h"

#if IGNIS_WITH_CUDA
#include "core/cuda_check.h"
#endif

namespace ignis {

void synchronize(Stream stream) {
#if IGNIS_WITH_CUDA
  IGNIS_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.handle)));
#else
  (void)stream;
#endif
}

}  // namespace ignis
