#pragma once
// What every binding file shares: Python arrays (numpy arrays, torch tensors, anything that speaks
// DLPack or the buffer protocol) viewed as ignis Tensors, outputs of the caller's kind, the stream
// an op runs on, and f32 staging for CPU paths that exist only in f32.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::python {

namespace nb = nanobind;

// A Python array argument and an ignis view of its memory. `import` keeps the memory exported.
struct Array {
  nb::object object;
  nb::ndarray<nb::ro> import;
  Tensor tensor;
  bool is_torch = false;
};

// Views `object` (argument `name` of `op`): numpy arrays, torch tensors on the CPU or a GPU, or
// any CPU array with DLPack or the buffer protocol. Throws ignis::Error naming the argument.
Array array_arg(nb::handle object, const char* op, const char* name);

// array_arg for an array the op writes into: a read-only numpy array throws, naming the argument.
Array writable_arg(nb::handle object, const char* op, const char* name);

// array_arg (writable_arg when `writable`), or nothing for None.
std::optional<Array> optional_array_arg(nb::handle object, const char* op, const char* name, bool writable = false);

// A new contiguous array of `like`'s kind on its device: torch tensor for torch, numpy otherwise
// (numpy has no bf16: asking for one throws, naming `what`).
Array empty_like(const Array& like, const Shape& shape, DType dtype, const char* op, const char* what);

// A new contiguous numpy array in host memory (any dtype but bf16).
Array empty_numpy(const Shape& shape, DType dtype);

// t.size(d), or 0 when t has no dimension d: sizes an output before the op has checked its inputs'
// ranks (the op then reports the input, naming it).
std::int64_t extent(const Tensor& t, int d);

// The stream to run on: `stream` when given (a cudaStream_t as an int), torch's current stream
// for a torch CUDA tensor, CUDA's default stream otherwise.
Stream stream_arg(const Array& like, std::optional<std::uintptr_t> stream);

// Runs fn(stream) the way every op call runs: on stream_arg's stream, with the GIL released and
// the GPU that holds `like` current.
template <class Fn>
void run_op(const Array& like, std::optional<std::uintptr_t> stream, Fn&& fn);

// Parses a dtype name: "f64", "f32", "f16", "bf16" (also "float64", "float32", "float16",
// "bfloat16"). Throws ignis::Error naming argument `name` of `op`.
DType dtype_arg(std::string_view text, const char* op, const char* name);

// Makes `device` the current CUDA device for the guard's lifetime (nothing for the CPU), so that
// kernels launch on the GPU that holds the data.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Lets an op whose CPU path exists only in f32 take f64/f16/bf16 CPU arrays: in() casts an input
// to an f32 copy, out() hands out an f32 buffer, finish() casts those back into the real outputs.
// Staging happens only when the op lacks the dtype (`native` false) and all of the op's tensors
// (`all`) are contiguous CPU tensors of one floating dtype; otherwise every tensor passes through
// unchanged, so the op itself still reports mismatched or unsupported arguments.
class CpuF32Staging {
 public:
  CpuF32Staging(bool native, std::initializer_list<Tensor> all);
  Tensor in(const Tensor& t) const;
  Tensor out(const Tensor& t);
  // An output the op also reads (it accumulates into it): out() starting from t's values.
  Tensor inout(const Tensor& t);
  void finish();

 private:
  bool active_ = false;
  std::vector<std::pair<Tensor, Tensor>> outputs_;  // (f32 buffer, real output)
};

template <class Fn>
void run_op(const Array& like, std::optional<std::uintptr_t> stream, Fn&& fn) {
  const Stream s = stream_arg(like, stream);
  nb::gil_scoped_release unlocked;
  DeviceGuard device(like.tensor.device());
  fn(s);
}

}  // namespace ignis::python
