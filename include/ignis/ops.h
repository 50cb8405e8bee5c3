#pragma once
// Every op of ignis that runs on the host and on CUDA devices, one header per op family.
// Each entry point validates its arguments (shapes, dtypes, devices, contiguity) and throws
// ignis::Error naming the problem, then dispatches on the tensors' device and dtype.
// `*_supported(device, dtype)` answers whether a pair has an implementation, so callers and
// tests can ask instead of catching. Outputs are (non-owning) tensors that the op writes into.
#include "ignis/ops/activation.h"
#include "ignis/ops/attention.h"
#include "ignis/ops/attention_decode.h"
#include "ignis/ops/attention_scores.h"
#include "ignis/ops/cast.h"
#include "ignis/ops/cross_entropy.h"
#include "ignis/ops/embedding.h"
#include "ignis/ops/flash_attention.h"
#include "ignis/ops/fused_linear.h"
#include "ignis/ops/gemm.h"
#include "ignis/ops/kv_cache.h"
#include "ignis/ops/norm.h"
#include "ignis/ops/position_embedding.h"
#include "ignis/ops/rope.h"
#include "ignis/ops/rope_append.h"
#include "ignis/ops/sampling.h"
#include "ignis/ops/softmax.h"
#include "ignis/ops/transpose.h"
