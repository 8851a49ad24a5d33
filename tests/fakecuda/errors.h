// Names and descriptions of CUresult codes (the table behind cuGetErrorName/cuGetErrorString).
// Pure lookups over a constant table; thread-safe.

#ifndef MISSILE_TESTS_FAKECUDA_ERRORS_H_
#define MISSILE_TESTS_FAKECUDA_ERRORS_H_

#include <cuda.h>

#include <string_view>

namespace fakecuda {

// nullptr for a code cuda.h does not define.
const char* ErrorName(CUresult code);
const char* ErrorDescription(CUresult code);
// The code named `name` ("CUDA_ERROR_OUT_OF_MEMORY"); false if there is none.
bool ErrorByName(std::string_view name, CUresult* code);

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_ERRORS_H_
