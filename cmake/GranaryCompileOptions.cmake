# Language level, build tools and warning policy shared by every granary target.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()

find_program(GRANARY_CCACHE ccache)
if(GRANARY_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${GRANARY_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${GRANARY_CCACHE})
endif()

if(GRANARY_SANITIZE)
  string(REPLACE "," ";" _granary_sanitizers "${GRANARY_SANITIZE}")
  foreach(_s IN LISTS _granary_sanitizers)
    if(NOT _s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "GRANARY_SANITIZE: unknown sanitizer '${_s}'; "
                          "use address, undefined, thread or a comma-separated mix")
    endif()
  endforeach()
  if("thread" IN_LIST _granary_sanitizers AND "address" IN_LIST _granary_sanitizers)
    message(FATAL_ERROR "GRANARY_SANITIZE: thread cannot be combined with address")
  endif()
  add_compile_options(-fsanitize=${GRANARY_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  if("undefined" IN_LIST _granary_sanitizers)
    # cpprestsdk's byte streams view a streambuf<char> as a streambuf<uint8_t> in its own
    # headers; UBSan's vptr check reports that on every request body. All other checks stay.
    add_compile_options(-fno-sanitize=vptr)
  endif()
  add_link_options(-fsanitize=${GRANARY_SANITIZE})
endif()

# GRANARY_FUZZ: every library is instrumented for libFuzzer's coverage (fuzzer-no-link) and built
# with ASan and UBSan; the fuzz targets (tests/fuzz) add -fsanitize=fuzzer, which links
# libFuzzer's main. libstdc++'s assertions catch out-of-range string and vector indexing, which
# ASan misses inside a string's own buffer.
if(GRANARY_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GRANARY_FUZZ needs clang (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++ (Debian's package clang)")
  endif()
  if(GRANARY_SANITIZE)
    message(FATAL_ERROR "GRANARY_FUZZ brings its own sanitizers; leave GRANARY_SANITIZE empty")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                      -fno-sanitize=vptr -fno-omit-frame-pointer -D_GLIBCXX_ASSERTIONS)
  add_link_options(-fsanitize=address,undefined)
endif()

# Warnings as errors on granary's own code only; generated and third-party code
# gets the compiler's defaults (imported targets' headers are SYSTEM includes).
set(GRANARY_WARNINGS
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
    -Wold-style-cast -Wcast-align -Wimplicit-fallthrough -Wformat=2
    -Wmissing-declarations -Wundef -Werror
    # Designated initializers leave the rest at their defaults on purpose.
    -Wno-missing-field-initializers)
if(GRANARY_FUZZ)
  list(APPEND GRANARY_WARNINGS -Wno-error)  # see above
endif()
# Clang proves that what a mutex guards is only touched with the mutex held (GRANARY_GUARDED_BY,
# GRANARY_REQUIRES, ...: common/thread_annotations.h). Always an error, in the fuzz build too:
# -Wno-error leaves -Werror=thread-safety in force. GCC has no such analysis.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  list(APPEND GRANARY_WARNINGS -Wthread-safety -Werror=thread-safety)
endif()

# granary_target(<target>): apply the warning policy and the source-root include path.
function(granary_target target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${GRANARY_WARNINGS}>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()
