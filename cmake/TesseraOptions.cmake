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

if(TESSERA_SANITIZE)
  add_compile_options(-fsanitize=${TESSERA_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${TESSERA_SANITIZE})
endif()
