# Common compile options for every tessera target: warnings on, sanitizers when asked.
function(tessera_module_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wno-missing-field-initializers)
  # GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string operator+ (GCC bug
  # 105329); the warning is off for GCC only.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  # Boost.Asio's std::atomic_thread_fence makes GCC warn that ThreadSanitizer does not model
  # fences (-Wtsan); Asio's own locks are still seen, and the TSan runs are clean.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND TESSERA_SANITIZE MATCHES "thread")
    target_compile_options(${target} PRIVATE -Wno-tsan)
  endif()
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# tessera_light_optimization(TARGET LEVEL): TARGET's own files are compiled at LEVEL (e.g. -O0)
# when the build type asks for more. For code whose speed is not the point and whose
# optimisation costs most of the build: test bodies, fixtures and gtest's macros (at -O3 they
# took half of the build's compile time and none of the tests' run time), and the CLI, which
# parses and prints only (CLI11 is header-only, and each command file compiled the whole parser
# at -O3: 28 s a file, 7 s of it parsing). The modules they link keep the build type's flags (-O3 in Release), so every
# figure of the README is unchanged.
function(tessera_light_optimization target level)
  if(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
    target_compile_options(${target} PRIVATE ${level})
  endif()
endfunction()

if(TESSERA_SANITIZE)
  add_compile_options(-fsanitize=${TESSERA_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${TESSERA_SANITIZE})
endif()

# tessera_precompiled_headers(TARGET header...): target_precompile_headers(TARGET PRIVATE ...). The
# compiler launcher (scripts/compile_launcher) writes a checksum beside each precompiled header it
# compiles (cmake_pch.hxx.gch.sum; .pch.sum for clang): ccache hashes every include of a file it
# looks up, and a precompiled header is one, 130 MB of GoogleTest, GoogleMock and nlohmann/json
# hashed again for every test file (0.7 s a file, most of a warm build). With the sum present and
# CCACHE_PCH_EXTSUM=1, ccache hashes the sum instead (its manual, "pch_external_checksum").
#
#   tessera_precompiled_headers(tessera <CLI/CLI.hpp> <nlohmann/json.hpp>)
#   -> build/CMakeFiles/tessera.dir/cmake_pch.hxx.gch  and  cmake_pch.hxx.gch.sum ("9b1c...  -")
function(tessera_precompiled_headers target)
  target_precompile_headers(${target} PRIVATE ${ARGN})
endfunction()
