# Run by `cmake --install` (install(SCRIPT) in cmake/TesseraInstall.cmake): the systemd units and
# the configs in etc/, which depend on the prefix known only now. The units in packaging/systemd/
# name /usr/bin/tessera and /etc/tessera/ (the .deb's paths); under another prefix those are
# rewritten to <prefix>/bin/tessera and <prefix>/etc/tessera/. Needs TESSERA_PACKAGING_DIR and
# TESSERA_INSTALL_WORK_DIR (set by the install(CODE) before it).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(etc_dir /etc/tessera)
else()
  set(etc_dir ${CMAKE_INSTALL_PREFIX}/etc/tessera)
endif()
set(bin ${CMAKE_INSTALL_PREFIX}/bin/tessera)
file(MAKE_DIRECTORY ${TESSERA_INSTALL_WORK_DIR})
set(units)
foreach(unit tessera-serve.service tessera-agent.service tessera-node-arbiter.service)
  file(READ ${TESSERA_PACKAGING_DIR}/systemd/${unit} text)
  string(REPLACE "/usr/bin/tessera" "${bin}" text "${text}")
  string(REPLACE "/etc/tessera/" "${etc_dir}/" text "${text}")
  file(WRITE ${TESSERA_INSTALL_WORK_DIR}/${unit} "${text}")
  list(APPEND units ${TESSERA_INSTALL_WORK_DIR}/${unit})
endforeach()
file(INSTALL DESTINATION ${CMAKE_INSTALL_PREFIX}/lib/systemd/system TYPE FILE FILES ${units})
file(INSTALL DESTINATION ${etc_dir} TYPE FILE FILES ${TESSERA_PACKAGING_DIR}/config/serve.yaml
     ${TESSERA_PACKAGING_DIR}/config/agent.env ${TESSERA_PACKAGING_DIR}/config/node-arbiter.env)
# serve.env may hold the bootstrap admin token: readable by root only (systemd reads it as root).
file(INSTALL DESTINATION ${etc_dir} TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE
     FILES ${TESSERA_PACKAGING_DIR}/config/serve.env)
