# The tera_cuda library: the cuda backend (backend_cuda.cu) for sm_90 (H100,
# H200) and sm_80 (A100), linked against cudart and cuBLASLt. Warnings are
# errors, and so is a register spill that ptxas reports in any kernel.
# It needs only headers of src/ (the dialect, ops.h, backend.h) and the CUDA
# libraries.
# TERA_CUDA_ARCHS narrows the targets (scripts/device-check builds only the
# node's own, 90, to halve nvcc's time); CI builds both.
set(TERA_CUDA_ARCHS "90;80" CACHE STRING "CUDA architectures of the cuda backend (default: 90;80)")
function(tera_cuda_backend)
  add_library(tera_cuda STATIC ${PROJECT_SOURCE_DIR}/src/kernels/gpu/cuda/backend_cuda.cu)
  target_include_directories(tera_cuda PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(tera_cuda PUBLIC CUDA::cudart CUDA::cublasLt)
  set_target_properties(tera_cuda PROPERTIES CUDA_ARCHITECTURES "${TERA_CUDA_ARCHS}" CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(tera_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xptxas=-warn-spills,-Werror
                              -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-Werror -O3>)
endfunction()
