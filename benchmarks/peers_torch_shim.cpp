// The two libtorch symbols that sgl-deep-gemm 0.2.0's prebuilt _C.so takes from a newer torch than 2.11,
// defined on top of torch 2.11's own: benchmarks/peers_device.sh builds this against the machine's torch and
// preloads it where `import deep_gemm` fails on one of them. Nothing else of DeepGEMM changes: its kernels
// are its own, JIT-compiled on the machine, and peers.py checks every output against our reference first.
//
//   g++ -std=c++17 -O2 -fPIC -shared -D_GLIBCXX_USE_CXX11_ABI=1 -I$TORCH/include peers_torch_shim.cpp \
//       -L$TORCH/lib -lc10 -ltorch_cpu -o peers_torch_shim.so
#include <ATen/core/TensorBase.h>
#include <c10/util/Exception.h>
#include <torch/headeronly/version.h>

#include <new>
#include <string>
#include <utility>

// From torch 2.12 on, both are libtorch's own, and the second's name would call itself here.
static_assert(TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR <= 11, "peers_torch_shim.cpp is for torch <= 2.11");

// torch >= 2.12 exports ValueError's constructor; 2.11 inherits Error's inline (its vtable is exported).
void shim_value_error(c10::ValueError* self, c10::SourceLocation loc, std::string msg) __asm__(
    "_ZN3c1010ValueErrorC1ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
void shim_value_error(c10::ValueError* self, c10::SourceLocation loc, std::string msg) {
  new (self) c10::ValueError(loc, std::move(msg));
}

// torch >= 2.12 names const_data_ptr<float> without 2.11's enable_if parameter.
const float* shim_const_data_ptr_float(const at::TensorBase* self) __asm__(
    "_ZNK2at10TensorBase14const_data_ptrIfEEPKT_v");
const float* shim_const_data_ptr_float(const at::TensorBase* self) {
  return self->const_data_ptr<float>();
}
