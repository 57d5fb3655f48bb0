# tessera_module(): the one way a module is declared.
#
#   tessera_module(sched
#     SOURCES src/sched/tenant.cc src/sched/scheduler.cc
#     DEPENDS placement core              # other modules, by short name (cmake/module_deps.txt)
#     LIBS yaml-cpp)                      # third-party libraries, linked PRIVATE
#
# makes the static library tessera_<name> (alias tessera::<name>) with include/ public and the
# repository root private (for src/<name>/ private headers), position-independent objects (the
# SPANK plugin and the shim are shared objects that link modules), the house warnings, and
# checks at configure time that
#   * every DEPENDS entry is allowed by cmake/module_deps.txt (the design's arrows), and
#   * no source file belongs to two targets (tessera_claim_sources), and, at the end of the
#     top-level CMakeLists.txt (tessera_check_all_sources_claimed), that every src/**/*.cc
#     belongs to one.
# scripts/check_modules.py checks the same table against the #include lines (a ctest test).

set(TESSERA_MODULE_DEPS_FILE ${PROJECT_SOURCE_DIR}/cmake/module_deps.txt)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TESSERA_MODULE_DEPS_FILE})
file(STRINGS ${TESSERA_MODULE_DEPS_FILE} tessera_dep_lines REGEX "^[a-z0-9_]+:")
foreach(line IN LISTS tessera_dep_lines)
  string(REGEX MATCH "^([a-z0-9_]+):(.*)$" _ "${line}")
  set(mod "${CMAKE_MATCH_1}")
  string(STRIP "${CMAKE_MATCH_2}" deps)
  separate_arguments(deps)
  set(TESSERA_ALLOWED_${mod} ${deps})
  list(APPEND TESSERA_KNOWN_MODULES ${mod})
endforeach()

# tessera_claim_sources(TARGET src...): records that these sources belong to TARGET; a source
# claimed twice is a configure error.
function(tessera_claim_sources target)
  foreach(src IN LISTS ARGN)
    get_filename_component(abs "${src}" ABSOLUTE BASE_DIR ${PROJECT_SOURCE_DIR})
    string(MAKE_C_IDENTIFIER "${abs}" key)
    get_property(owner GLOBAL PROPERTY TESSERA_SOURCE_OWNER_${key})
    if(owner)
      message(FATAL_ERROR "${src} belongs to ${owner} and ${target}: every source belongs to one module")
    endif()
    set_property(GLOBAL PROPERTY TESSERA_SOURCE_OWNER_${key} ${target})
    set_property(GLOBAL APPEND PROPERTY TESSERA_CLAIMED_SOURCES "${abs}")
  endforeach()
endfunction()

function(tessera_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPENDS;LIBS" ${ARGN})
  if(NOT name IN_LIST TESSERA_KNOWN_MODULES)
    message(FATAL_ERROR "tessera_module(${name}): not a module of cmake/module_deps.txt")
  endif()
  foreach(dep IN LISTS M_DEPENDS)
    if(NOT dep IN_LIST TESSERA_ALLOWED_${name})
      message(FATAL_ERROR "tessera_module(${name}) DEPENDS ${dep}: cmake/module_deps.txt does not let "
        "${name} depend on ${dep} (allowed: ${TESSERA_ALLOWED_${name}})")
    endif()
  endforeach()
  tessera_claim_sources(tessera_${name} ${M_SOURCES})
  add_library(tessera_${name} STATIC ${M_SOURCES})
  add_library(tessera::${name} ALIAS tessera_${name})
  target_include_directories(tessera_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include PRIVATE ${PROJECT_SOURCE_DIR})
  foreach(dep IN LISTS M_DEPENDS)
    target_link_libraries(tessera_${name} PUBLIC tessera::${dep})
  endforeach()
  if(M_LIBS)
    target_link_libraries(tessera_${name} PRIVATE ${M_LIBS})
  endif()
  set_target_properties(tessera_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  tessera_module_options(tessera_${name})
endfunction()

# tessera_module_part(NAME MODULE SOURCES src... LIBS targets...): a static library NAME of some
# of MODULE's own sources (each must belong to tessera_MODULE), with the module's include paths,
# options and position-independent code, linking LIBS publicly. For a sanitizer tree that tests
# one part of a module and need not compile the rest under instrumentation:
#
#   tessera_module_part(tessera_node_lease_arbiter node
#     SOURCES src/node/lease_arbiter.cc src/node/timeslice.cc LIBS tessera::enforce tessera::core)
#
# The module itself stays the one target the product links; a part is only linked by tests and
# fuzzers (the shim's tests use the arbiter, not the agent; the HTTP fuzzer reaches the daemon's
# parser and decoders, not the control plane).
function(tessera_module_part name module)
  cmake_parse_arguments(M "" "" "SOURCES;LIBS" ${ARGN})
  set(abs_sources "")
  foreach(src IN LISTS M_SOURCES)
    get_filename_component(abs "${src}" ABSOLUTE BASE_DIR ${PROJECT_SOURCE_DIR})
    string(MAKE_C_IDENTIFIER "${abs}" key)
    get_property(owner GLOBAL PROPERTY TESSERA_SOURCE_OWNER_${key})
    if(NOT owner STREQUAL "tessera_${module}")
      message(FATAL_ERROR "tessera_module_part(${name} ${module}): ${src} is not a source of tessera_${module}")
    endif()
    list(APPEND abs_sources ${abs})
  endforeach()
  add_library(${name} STATIC ${abs_sources})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${M_LIBS})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  tessera_module_options(${name})
endfunction()

# Every src/**/*.cc belongs to exactly one target (call once, after all targets).
function(tessera_check_all_sources_claimed)
  file(GLOB_RECURSE all CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.cc)
  get_property(claimed GLOBAL PROPERTY TESSERA_CLAIMED_SOURCES)
  foreach(f IN LISTS all)
    if(NOT f IN_LIST claimed)
      file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${f})
      message(FATAL_ERROR "${rel} belongs to no module: add it to its module's tessera_module() SOURCES")
    endif()
  endforeach()
endfunction()
