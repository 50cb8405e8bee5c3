#include "common.h"

#include <nanobind/stl/string.h>

#include <string>

#include "ignis/ops/cast.h"

#if IGNIS_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ignis::python {
namespace {

namespace dl = nb::dlpack;

std::string type_str(nb::handle object) { return nb::cast<std::string>(nb::type_name(object.type())); }

bool is_torch_object(nb::handle object) {
  nb::object module = nb::getattr(object.type(), "__module__", nb::none());
  if (!nb::isinstance<nb::str>(module)) return false;
  const std::string name = nb::cast<std::string>(module);
  return name == "torch" || name.starts_with("torch.");
}

std::string dlpack_dtype_str(dl::dtype t) {
  std::string kind;
  switch (static_cast<dl::dtype_code>(t.code)) {
    case dl::dtype_code::Int: kind = "int"; break;
    case dl::dtype_code::UInt: kind = "uint"; break;
    case dl::dtype_code::Float: kind = "float"; break;
    case dl::dtype_code::Bfloat: kind = "bfloat"; break;
    case dl::dtype_code::Complex: kind = "complex"; break;
    case dl::dtype_code::Bool: kind = "bool"; break;
    default: kind = "dlpack type code " + std::to_string(t.code) + " of "; break;
  }
  std::string text = kind + std::to_string(t.bits);
  if (t.lanes != 1) text += " x" + std::to_string(t.lanes);
  return text;
}

std::optional<DType> from_dlpack_dtype(dl::dtype t) {
  if (t.lanes != 1) return std::nullopt;
  switch (static_cast<dl::dtype_code>(t.code)) {
    case dl::dtype_code::Float:
      if (t.bits == 64) return DType::f64;
      if (t.bits == 32) return DType::f32;
      if (t.bits == 16) return DType::f16;
      break;
    case dl::dtype_code::Bfloat:
      if (t.bits == 16) return DType::bf16;
      break;
    case dl::dtype_code::Int:
      if (t.bits == 32) return DType::i32;
      if (t.bits == 64) return DType::i64;
      break;
    case dl::dtype_code::UInt:
      if (t.bits == 8) return DType::u8;
      break;
    default: break;
  }
  return std::nullopt;
}

dl::dtype to_dlpack_dtype(DType t) {
  auto code = [](dl::dtype_code c) { return static_cast<std::uint8_t>(c); };
  const auto bits = static_cast<std::uint8_t>(8 * dtype_size(t));
  switch (t) {
    case DType::f64:
    case DType::f32:
    case DType::f16: return {code(dl::dtype_code::Float), bits, 1};
    case DType::bf16: return {code(dl::dtype_code::Bfloat), bits, 1};
    case DType::i32:
    case DType::i64: return {code(dl::dtype_code::Int), bits, 1};
    case DType::u8: return {code(dl::dtype_code::UInt), bits, 1};
  }
  return {};
}

const char* torch_dtype_name(DType t) {
  switch (t) {
    case DType::f64: return "float64";
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
  }
  return "";
}

bool try_import(nb::handle object, nb::ndarray<nb::ro>& out) {
  return nb::try_cast(object, out, /*convert=*/false);
}

// A torch tensor's DLPack capsule from torch.utils.dlpack.to_dlpack, a C function (0.6 us a call on the H200
// machine's host): Tensor.__dlpack__ is Python code that took 5.2-5.4 us an input (PERF_NOTES session 31). The
// stream handshake __dlpack__ adds is not needed: ignis runs on torch's current stream (stream_arg). A tensor
// that only records a pending negation (a neg view) is resolved first, as torch's own ops would see it; a
// tensor that requires grad is read through a detached view (these ops read values only). None when torch
// cannot export the tensor (a sparse layout, say): the caller then names the argument.
nb::object torch_capsule(nb::handle tensor) {
  // Looked up once and never released (a static's destructor may run after Python has finalized).
  static nb::handle to_dlpack = nb::getattr(nb::module_::import_("torch.utils.dlpack"), "to_dlpack").release();
  try {
    nb::object plain = nb::borrow(tensor);
    if (nb::cast<bool>(plain.attr("is_neg")())) plain = plain.attr("resolve_neg")();
    if (nb::cast<bool>(plain.attr("requires_grad"))) plain = plain.attr("detach")();
    return to_dlpack(plain);
  } catch (const nb::python_error&) {
    return nb::none();
  }
}

}  // namespace

Array array_arg(nb::handle object, const char* op, const char* name) {
  Array a;
  a.object = nb::borrow(object);
  a.is_torch = is_torch_object(object);
  if (!try_import(a.is_torch ? torch_capsule(object) : a.object, a.import))
    fail_expected(op, name, "a numpy array or a torch tensor", type_str(object));

  const nb::ndarray<nb::ro>& in = a.import;
  const std::optional<DType> dtype = from_dlpack_dtype(in.dtype());
  if (!dtype)
    fail_expected(op, detail::concat(name, ".dtype"), "f64, f32, f16, bf16, i32, i64 or u8",
                  dlpack_dtype_str(in.dtype()));

  Device device;
  if (in.device_type() == nb::device::cpu::value) {
    device = Device::cpu();
  } else if (in.device_type() == nb::device::cuda::value) {
    device = Device::cuda(in.device_id());
    // Outputs on a GPU are made as torch tensors (on torch's allocator and stream).
    if (!a.is_torch) fail_expected(op, name, "a torch tensor for GPU memory", type_str(object));
  } else {
    fail_expected(op, detail::concat(name, ".device"), "cpu or cuda",
                  detail::concat("DLPack device type ", in.device_type()));
  }

  Shape shape(in.ndim()), strides(in.ndim());
  for (std::size_t d = 0; d < in.ndim(); ++d) {
    shape[d] = static_cast<std::int64_t>(in.shape(d));
    strides[d] = in.stride_ptr() ? in.stride(d) : 0;
  }
  // Exporters disagree on the strides of an empty array; any layout of no elements is contiguous.
  if (!in.stride_ptr() || in.size() == 0) strides = contiguous_strides(shape);
  a.tensor = Tensor::view(const_cast<void*>(static_cast<const void*>(in.data())), *dtype, device, shape, strides);
  return a;
}

Array writable_arg(nb::handle object, const char* op, const char* name) {
  Array a = array_arg(object, op, name);
  // The import above accepts read-only memory; a writable import refuses it.
  nb::ndarray<> writable;
  if (!a.is_torch && !nb::try_cast(object, writable, /*convert=*/false))
    fail_expected(op, name, "a writable array", "a read-only array");
  return a;
}

std::optional<Array> optional_array_arg(nb::handle object, const char* op, const char* name, bool writable) {
  if (object.is_none()) return std::nullopt;
  return writable ? writable_arg(object, op, name) : array_arg(object, op, name);
}

Array empty_like(const Array& like, const Shape& shape, DType dtype, const char* op, const char* what) {
  Array out;
  const Device device = like.tensor.device();
  if (like.is_torch) {
    nb::list extents;
    for (std::int64_t e : shape) extents.append(e);
    nb::object torch_dtype = nb::module_::import_("torch").attr(torch_dtype_name(dtype));
    out.object = like.object.attr("new_empty")(nb::tuple(extents), nb::arg("dtype") = torch_dtype);
    out.is_torch = true;
    const auto data = nb::cast<std::uintptr_t>(out.object.attr("data_ptr")());
    out.tensor = Tensor::view(reinterpret_cast<void*>(data), dtype, device, shape);
    return out;
  }
  check_arg(dtype != DType::bf16, op, what, "f64, f32, f16, i32, i64 or u8 for a numpy result (numpy has no bf16)",
            dtype);
  return empty_numpy(shape, dtype);
}

Array empty_numpy(const Shape& shape, DType dtype) {
  Array out;
  // Host memory from ignis; the numpy array keeps it alive through the capsule.
  auto* owned = new Tensor(Tensor::empty(shape, dtype, Device::cpu()));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<std::size_t> extents(shape.begin(), shape.end());
  out.object = nb::ndarray<nb::numpy>(owned->data(), extents.size(), extents.data(), owner, nullptr,
                                      to_dlpack_dtype(dtype), nb::device::cpu::value)
                   .cast();
  out.tensor = *owned;
  return out;
}

std::int64_t extent(const Tensor& t, int d) {
  const int rank = t.dim();
  return (d >= -rank && d < rank) ? t.size(d) : 0;
}

Stream stream_arg(const Array& like, std::optional<std::uintptr_t> stream) {
  if (stream) return Stream{reinterpret_cast<void*>(*stream)};
  if (like.is_torch && like.tensor.device().is_cuda()) {
    // torch._C._cuda_getCurrentRawStream(device) returns the cudaStream_t as an int, the call Triton's torch
    // launcher makes; torch.cuda.current_stream(device).cuda_stream, the public way, cost 3.8 us a call on the
    // H200 machine's host (PERF_NOTES session 31). The public way serves a torch without the private function.
    static nb::handle raw_stream = [] {
      nb::object c = nb::module_::import_("torch._C");
      return nb::hasattr(c, "_cuda_getCurrentRawStream") ? nb::getattr(c, "_cuda_getCurrentRawStream").release()
                                                          : nb::handle();
    }();
    const int device = like.tensor.device().index;
    if (raw_stream) return Stream{reinterpret_cast<void*>(nb::cast<std::uintptr_t>(raw_stream(device)))};
    nb::object current = nb::module_::import_("torch.cuda").attr("current_stream")(device);
    return Stream{reinterpret_cast<void*>(nb::cast<std::uintptr_t>(current.attr("cuda_stream")))};
  }
  return Stream{};
}

DType dtype_arg(std::string_view text, const char* op, const char* name) {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    if (text == dtype_name(t) || text == torch_dtype_name(t)) return t;
  }
  fail_expected(op, name, "\"f64\", \"f32\", \"f16\" or \"bf16\"", detail::concat('"', text, '"'));
}

DeviceGuard::DeviceGuard(Device device) {
#if IGNIS_WITH_CUDA
  if (!device.is_cuda()) return;
  int current = 0;
  cudaError_t status = cudaGetDevice(&current);
  if (status == cudaSuccess && current != device.index) {
    status = cudaSetDevice(device.index);
    if (status == cudaSuccess) previous_ = current;
  }
  if (status != cudaSuccess)
    throw Error(detail::concat("cudaSetDevice(", device.index, "): ", cudaGetErrorName(status), " (",
                               cudaGetErrorString(status), ")"));
#else
  (void)device;
#endif
}

DeviceGuard::~DeviceGuard() {
#if IGNIS_WITH_CUDA
  if (previous_ >= 0) cudaSetDevice(previous_);  // a destructor must not throw
#endif
}

CpuF32Staging::CpuF32Staging(bool native, std::initializer_list<Tensor> all) {
  if (native || all.size() == 0) return;
  const DType dtype = all.begin()->dtype();
  if (!is_floating(dtype) || dtype == DType::f32) return;
  for (const Tensor& t : all)
    if (!t.device().is_cpu() || t.dtype() != dtype || !t.is_contiguous()) return;
  active_ = true;
}

Tensor CpuF32Staging::in(const Tensor& t) const {
  if (!active_) return t;
  Tensor f32 = Tensor::empty(t.shape(), DType::f32, Device::cpu());
  cast(t, f32);
  return f32;
}

Tensor CpuF32Staging::out(const Tensor& t) {
  if (!active_) return t;
  Tensor f32 = Tensor::empty(t.shape(), DType::f32, Device::cpu());
  outputs_.emplace_back(f32, t);
  return f32;
}

Tensor CpuF32Staging::inout(const Tensor& t) {
  if (!active_) return t;
  Tensor f32 = in(t);
  outputs_.emplace_back(f32, t);
  return f32;
}

void CpuF32Staging::finish() {
  for (const auto& [f32, real] : outputs_) cast(f32, real);
  outputs_.clear();
}

}  // namespace ignis::python
