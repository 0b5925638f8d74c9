# The tera_cuda library: the cuda backend (backend_cuda.cu) for sm_90 (H100,
# H200) and sm_80 (A100), linked against cudart and cuBLASLt. Warnings are
# errors, and so is a register spill that ptxas reports in any kernel.
# Usage: tera_cuda_backend(<library with backend.cpp and the kernel headers>)
function(tera_cuda_backend base)
  add_library(tera_cuda STATIC ${PROJECT_SOURCE_DIR}/src/kernels/gpu/cuda/backend_cuda.cu)
  target_include_directories(tera_cuda PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(tera_cuda PUBLIC ${base} CUDA::cudart CUDA::cublasLt)
  set_target_properties(tera_cuda PROPERTIES CUDA_ARCHITECTURES "90;80" CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(tera_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xptxas=-warn-spills,-Werror
                              -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-Werror -O3>)
endfunction()
