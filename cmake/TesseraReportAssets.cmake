# uPlot inside the simulator's HTML reports (src/sim/report_charts.cc, docs/simulator-reports.md):
# a report is one file opened from disk with no network, so uPlot's minified JS and CSS (the
# version pinned in ui/package-lock.json, installed by the dashboard's `npm ci`) are compiled into
# tessera_sim as byte arrays in a generated source.
#
# Without npm (TESSERA_UI_ENABLED off) the generated source holds empty arrays: the reports are
# still written, with static SVG charts, and say so.
#
# Worked example: a configure with npm builds
#   build/ui-npm-ci.stamp                       (TesseraUi.cmake: npm ci in ui/)
#   build/generated/sim_uplot_assets.cc         kUplotJs = {0x2f,0x2a,0x21,...,0x00} (51 kB), kUplotCss, kUplotVersion "1.6.32"
# and again whenever package-lock.json changes (the stamp is newer).
set(tessera_uplot_cc ${PROJECT_BINARY_DIR}/generated/sim_uplot_assets.cc)
if(TESSERA_UI_ENABLED)
  set(uplot_dist ${PROJECT_SOURCE_DIR}/ui/node_modules/uplot/dist)
  add_custom_command(
    OUTPUT ${tessera_uplot_cc}
    COMMAND ${CMAKE_COMMAND} -DJS=${uplot_dist}/uPlot.iife.min.js -DCSS=${uplot_dist}/uPlot.min.css
            -DPACKAGE=${PROJECT_SOURCE_DIR}/ui/node_modules/uplot/package.json -DOUT=${tessera_uplot_cc}
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedUplot.cmake
    DEPENDS ${PROJECT_BINARY_DIR}/ui-npm-ci.stamp ${PROJECT_SOURCE_DIR}/cmake/EmbedUplot.cmake
    COMMENT "sim: embed uPlot (ui/node_modules/uplot) in the reports"
    VERBATIM)
else()
  execute_process(COMMAND ${CMAKE_COMMAND} -DOUT=${tessera_uplot_cc} -P ${PROJECT_SOURCE_DIR}/cmake/EmbedUplot.cmake)
endif()
target_sources(tessera_sim PRIVATE ${tessera_uplot_cc})
