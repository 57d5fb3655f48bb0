# The dashboard (ui/, docs/dashboard.md): `npm ci` from ui/package-lock.json (the npm registry),
# then `vite build` into <build>/ui/, which `tessera serve` finds next to the build tree's binary
# and `cmake --install` puts in share/tessera/ui (the .deb carries it).
#
# TESSERA_UI: AUTO (default) builds it when npm is found, ON requires npm, OFF skips it. Without
# it the daemon builds as before and /ui answers 404 no_dashboard.
#
# Worked example: a configure with npm on the PATH builds target tessera_ui (part of `all`):
#   build/ui-npm-ci.stamp   after `npm ci` (again when package-lock.json changes)
#   build/ui/index.html     after `vite build` (again when a file under ui/src changes)
set(TESSERA_UI AUTO CACHE STRING "Build the dashboard with npm: AUTO (when npm is found), ON, OFF")
set_property(CACHE TESSERA_UI PROPERTY STRINGS AUTO ON OFF)
find_program(TESSERA_NPM npm)
find_program(TESSERA_NODE node)
set(TESSERA_UI_ENABLED OFF)
if(TESSERA_UI STREQUAL "ON" OR TESSERA_UI STREQUAL "AUTO")
  if(TESSERA_NPM AND TESSERA_NODE)
    set(TESSERA_UI_ENABLED ON)
  elseif(TESSERA_UI STREQUAL "ON")
    message(FATAL_ERROR "TESSERA_UI=ON needs npm and node (scripts/setup installs them), or -DTESSERA_UI=OFF")
  else()
    message(STATUS "tessera: npm not found: the dashboard (ui/) is not built; /ui will answer 404")
  endif()
endif()

set(TESSERA_UI_DIR ${PROJECT_BINARY_DIR}/ui)
# For scripts that read the cache (tests/install/): whether this tree builds the tessera_ui target.
set(TESSERA_UI_BUILT ${TESSERA_UI_ENABLED} CACHE INTERNAL "the tessera_ui target exists")
if(TESSERA_UI_ENABLED)
  set(ui_src ${PROJECT_SOURCE_DIR}/ui)
  file(GLOB_RECURSE ui_sources CONFIGURE_DEPENDS ${ui_src}/src/*)
  add_custom_command(
    OUTPUT ${PROJECT_BINARY_DIR}/ui-npm-ci.stamp
    COMMAND ${TESSERA_NPM} ci --no-audit --no-fund --loglevel=error
    COMMAND ${CMAKE_COMMAND} -E touch ${PROJECT_BINARY_DIR}/ui-npm-ci.stamp
    DEPENDS ${ui_src}/package.json ${ui_src}/package-lock.json
    WORKING_DIRECTORY ${ui_src}
    COMMENT "ui: npm ci (ui/package-lock.json)"
    VERBATIM)
  add_custom_command(
    OUTPUT ${TESSERA_UI_DIR}/index.html
    COMMAND ${TESSERA_NPM} run --silent build -- --outDir ${TESSERA_UI_DIR} --emptyOutDir --logLevel warn
    DEPENDS ${PROJECT_BINARY_DIR}/ui-npm-ci.stamp ${ui_sources} ${ui_src}/index.html ${ui_src}/vite.config.js
    WORKING_DIRECTORY ${ui_src}
    COMMENT "ui: vite build -> ${TESSERA_UI_DIR}"
    VERBATIM)
  add_custom_target(tessera_ui ALL DEPENDS ${TESSERA_UI_DIR}/index.html)
  install(DIRECTORY ${TESSERA_UI_DIR}/ DESTINATION share/tessera/ui)
endif()
