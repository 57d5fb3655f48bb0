# Common compile options for every tessera target: warnings on, sanitizers when asked.
function(tessera_module_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wno-missing-field-initializers)
  # GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string operator+ (GCC bug
  # 105329); the warning is off for GCC only.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(TESSERA_SANITIZE)
  add_compile_options(-fsanitize=${TESSERA_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${TESSERA_SANITIZE})
endif()
