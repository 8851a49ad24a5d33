// CUresult names and descriptions, and the cuGetErrorName/cuGetErrorString entry points.

#include "errors.h"

#include "entry_points.h"

namespace fakecuda {
namespace {

struct ErrorInfo {
  CUresult code;
  const char* name;
  const char* description;
};

constexpr ErrorInfo kErrors[] = {
#define FAKECUDA_ERROR(code, description) {code, #code, description},
#include "error_table.inc"
#undef FAKECUDA_ERROR
};

const ErrorInfo* Find(CUresult code) {
  for (const ErrorInfo& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

}  // namespace

const char* ErrorName(CUresult code) {
  const ErrorInfo* e = Find(code);
  return e ? e->name : nullptr;
}

const char* ErrorDescription(CUresult code) {
  const ErrorInfo* e = Find(code);
  return e ? e->description : nullptr;
}

bool ErrorByName(std::string_view name, CUresult* code) {
  for (const ErrorInfo& e : kErrors) {
    if (name == e.name) {
      *code = e.code;
      return true;
    }
  }
  return false;
}

}  // namespace fakecuda

extern "C" {

// Both work before cuInit, as in the real driver.
CUresult cuGetErrorString(CUresult error, const char** pStr) {
  FAKECUDA_ENTER_NOINIT(cuGetErrorString);
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = fakecuda::ErrorDescription(error);
  return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char** pStr) {
  FAKECUDA_ENTER_NOINIT(cuGetErrorName);
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = fakecuda::ErrorName(error);
  return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // extern "C"
