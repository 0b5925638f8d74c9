# The HIP compile of the kernel dialect (kernels_hip.cpp): hipcc for gfx90a
# (MI250X), warnings as errors, an object file only (Debian 12 has no hipBLAS
# or RCCL to link a HIP backend against). Built with the rest when hipcc is
# found (TERA_HIP=AUTO), required with TERA_HIP=ON (scripts/build hip).
set(TERA_HIP "AUTO" CACHE STRING "Compile the GPU kernels with hipcc for gfx90a: AUTO (when hipcc is found), ON or OFF")
if(NOT TERA_HIP STREQUAL "OFF")
  find_program(TERA_HIPCC hipcc)
  if(TERA_HIPCC)
    set(src ${CMAKE_CURRENT_LIST_DIR}/kernels_hip.cpp)
    set(obj ${CMAKE_BINARY_DIR}/kernels_hip_gfx90a.o)
    file(GLOB_RECURSE gpu_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/gpu/*.h
         ${PROJECT_SOURCE_DIR}/src/kernels/gpu/*.cuh)
    add_custom_command(OUTPUT ${obj}
      COMMAND ${TERA_HIPCC} --offload-arch=gfx90a -std=c++20 -O3 -Wall -Wextra -Wno-unused-parameter -Werror
              -I${PROJECT_SOURCE_DIR}/src -c ${src} -o ${obj}
      DEPENDS ${src} ${gpu_headers} ${PROJECT_SOURCE_DIR}/src/kernels/ops.h ${PROJECT_SOURCE_DIR}/src/kernels/backend.h
      COMMENT "hipcc: the GPU kernels for gfx90a"
      VERBATIM)
    add_custom_target(tera_hip_kernels ALL DEPENDS ${obj})
    message(STATUS "tera: HIP kernels for gfx90a ON (${TERA_HIPCC})")
  elseif(TERA_HIP STREQUAL "ON")
    message(FATAL_ERROR "TERA_HIP=ON but hipcc was not found (Debian 12: apt-get install hipcc)")
  else()
    message(STATUS "tera: HIP kernels OFF (no hipcc)")
  endif()
endif()
