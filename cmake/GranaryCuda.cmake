# CUDA is compiled when nvcc exists (GRANARY_WITH_CUDA=AUTO) or when asked for (ON).
# Binaries built with CUDA still run on machines without a GPU or driver: every CUDA
# call's error is treated as "no GPU" (see common/gpu/).
set(GRANARY_CUDA_ENABLED OFF)
if(NOT GRANARY_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Turing through Hopper; `native` fails on machines without a GPU.
      set(CMAKE_CUDA_ARCHITECTURES 75 80 86 89 90)
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag; set it once the language is enabled
    # (a standard requested before that would break CMake's own compiler checks).
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    find_package(CUDAToolkit REQUIRED)
    set(GRANARY_CUDA_ENABLED ON)
  elseif(GRANARY_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GRANARY_WITH_CUDA=ON but no CUDA compiler was found; "
                        "install the CUDA toolkit or set GRANARY_WITH_CUDA=AUTO")
  endif()
endif()
message(STATUS "granary: CUDA ${GRANARY_CUDA_ENABLED}")
