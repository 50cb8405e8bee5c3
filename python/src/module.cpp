// The Python module `ignis`: ops on numpy arrays and torch tensors, one binding file per op family
// (python/src/<family>.cpp, each with a bind_<family>()). ignis::Error surfaces as ignis.Error,
// which is both a ValueError and a RuntimeError, with the same message.
#include <nanobind/stl/string.h>

#include <exception>

#include "common.h"
#include "ignis/device.h"
#include "ignis/error.h"

namespace ignis::python {
void bind_activation(nb::module_& m);
void bind_attention(nb::module_& m);
void bind_attention_decode(nb::module_& m);
void bind_cast(nb::module_& m);
void bind_cross_entropy(nb::module_& m);
void bind_embedding(nb::module_& m);
void bind_fused_linear(nb::module_& m);
void bind_gemm(nb::module_& m);
void bind_kv_cache(nb::module_& m);
void bind_norm(nb::module_& m);
void bind_rope(nb::module_& m);
void bind_sampling(nb::module_& m);
void bind_softmax(nb::module_& m);
void bind_transpose(nb::module_& m);
}  // namespace ignis::python

NB_MODULE(ignis, m) {
  namespace nb = nanobind;
  using namespace ignis::python;
  m.doc() =
      "ignis: attention kernels and LLM ops. Functions take numpy arrays or torch tensors (CPU or CUDA) and\n"
      "return results of the same kind; on a GPU they run on torch's current stream unless `stream` is given.";
  m.attr("__version__") = IGNIS_VERSION;

  PyObject* bases = PyTuple_Pack(2, PyExc_ValueError, PyExc_RuntimeError);
  PyObject* error = PyErr_NewExceptionWithDoc(
      "ignis.Error", "An invalid argument or a failed CUDA call; the message names the argument at fault.", bases,
      nullptr);
  Py_XDECREF(bases);
  if (error == nullptr) throw nb::python_error();
  // The module attribute holds the reference the translator relies on for the life of the process.
  m.attr("Error") = nb::steal(error);
  nb::register_exception_translator(
      [](const std::exception_ptr& p, void* type) {
        try {
          std::rethrow_exception(p);
        } catch (const ignis::Error& e) {
          PyErr_SetString(static_cast<PyObject*>(type), e.what());
        }
      },
      error);

  m.def("cuda_available", &ignis::cuda_available, "True when ignis was built with CUDA and a GPU answers.");
  m.def("cuda_device_summary", &ignis::cuda_device_summary, "The first GPU, or why none is usable.");

  bind_activation(m);
  bind_attention(m);
  bind_attention_decode(m);
  bind_cast(m);
  bind_cross_entropy(m);
  bind_embedding(m);
  bind_fused_linear(m);
  bind_gemm(m);
  bind_kv_cache(m);
  bind_norm(m);
  bind_rope(m);
  bind_sampling(m);
  bind_softmax(m);
  bind_transpose(m);
}
