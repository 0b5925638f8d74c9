# The hip backend (backend_hip.cpp, backend_hip.h): hipcc for TERA_HIP_ARCHS
# (gfx90a, MI250X, by default; "gfx90a;gfx942" on a ROCm that knows MI300),
# warnings as errors, a register spill in any kernel an error (checked in
# the compiler's assembly, scripts/check-hip-spills), linked against the HIP
# runtime (libamdhip64). Built with the rest when hipcc and the runtime are
# found (TERA_HIP=AUTO), required with TERA_HIP=ON (scripts/build hip).
# hipcc is not a CMake language here (Debian's hipcc 5.2): the object is
# built by a custom command and wrapped in the static library tera_hip.
set(TERA_HIP "AUTO" CACHE STRING "Build the hip backend with hipcc: AUTO (when hipcc and the HIP runtime are found), ON or OFF")
# CMAKE_HIP_ARCHITECTURES, as a ROCm machine's build scripts set it, is
# taken as the default ("gfx90a;gfx942": MI250X and MI300 in one binary).
set(default_archs gfx90a)
if(CMAKE_HIP_ARCHITECTURES)
  set(default_archs "${CMAKE_HIP_ARCHITECTURES}")
endif()
set(TERA_HIP_ARCHS "${default_archs}" CACHE STRING "AMD GPU architectures of the hip backend (default: gfx90a, or CMAKE_HIP_ARCHITECTURES)")
set(TERA_WITH_HIP OFF)
if(NOT TERA_HIP STREQUAL "OFF")
  find_program(TERA_HIPCC hipcc)
  find_library(TERA_AMDHIP64 amdhip64 HINTS /opt/rocm/lib)
  if(TERA_HIPCC AND TERA_AMDHIP64)
    set(src ${CMAKE_CURRENT_LIST_DIR}/backend_hip.cpp)
    set(work ${CMAKE_BINARY_DIR}/hip)
    set(obj ${work}/backend_hip.o)
    set(arch_flags "")
    foreach(arch ${TERA_HIP_ARCHS})
      list(APPEND arch_flags --offload-arch=${arch})
    endforeach()
    file(MAKE_DIRECTORY ${work})
    file(GLOB_RECURSE gpu_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/gpu/*.h
         ${PROJECT_SOURCE_DIR}/src/kernels/gpu/*.cuh)
    add_custom_command(OUTPUT ${obj}
      COMMAND ${TERA_HIPCC} ${arch_flags} -std=c++20 -O3 -fPIC -Wall -Wextra -Wno-unused-parameter -Werror -save-temps
              -I${PROJECT_SOURCE_DIR}/src -c ${src} -o ${obj}
      COMMAND /usr/bin/env python3 ${PROJECT_SOURCE_DIR}/scripts/check-hip-spills ${work}
      DEPENDS ${src} ${gpu_headers} ${PROJECT_SOURCE_DIR}/src/kernels/ops.h ${PROJECT_SOURCE_DIR}/src/kernels/backend.h
              ${PROJECT_SOURCE_DIR}/src/kernels/caching_allocator.h ${PROJECT_SOURCE_DIR}/src/kernels/staged_uploads.h
              ${PROJECT_SOURCE_DIR}/src/core/device_memory.h ${PROJECT_SOURCE_DIR}/scripts/check-hip-spills
      WORKING_DIRECTORY ${work}
      COMMENT "hipcc: the hip backend for ${TERA_HIP_ARCHS}"
      VERBATIM)
    add_library(tera_hip STATIC ${obj})
    set_source_files_properties(${obj} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
    set_target_properties(tera_hip PROPERTIES LINKER_LANGUAGE CXX)
    target_link_libraries(tera_hip PUBLIC ${TERA_AMDHIP64})
    set(TERA_WITH_HIP ON)
    message(STATUS "tera: hip backend ON for ${TERA_HIP_ARCHS} (${TERA_HIPCC}, ${TERA_AMDHIP64})")
  elseif(TERA_HIP STREQUAL "ON")
    message(FATAL_ERROR "TERA_HIP=ON but hipcc or the HIP runtime was not found (Debian 12: apt-get install hipcc "
                        "libamdhip64-dev; ROCm: module load rocm)")
  else()
    message(STATUS "tera: hip backend OFF (no hipcc or no HIP runtime)")
  endif()
endif()
