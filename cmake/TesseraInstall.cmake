# `cmake --install` and the Debian package (CPack), included from the top-level CMakeLists.txt
# after the targets (the fake NVML is defined in tests/). The layout under the prefix:
#
#   bin/tessera
#   lib/libtessera-shim.so                `tessera run` and the agent look in <exe>/../lib/
#   lib/spank_tessera.so                  the Slurm SPANK plugin (where spank.h was installed at
#                                         build time); it finds the shim beside itself
#   lib/tessera/fake/libnvidia-ml.so.1    the fake NVML for `tessera agent --fake-gpus` (built
#                                         with the tests: TESSERA_BUILD_TESTS=ON)
#   share/tessera/                        data/: traces, GPU catalog, NAB subset, example quota
#                                         file and price plan, each with its SOURCE.md/LICENSE
#                                         (DataDir() looks in <exe>/../share/tessera)
#   share/tessera/config/                 the sample configs (packaging/config/), for reference
#   share/doc/tessera/                    README.md, docs/
#   lib/systemd/system/                   tessera-serve.service, tessera-agent.service,
#                                         tessera-node-arbiter.service (Slurm nodes)
#   etc/tessera/                          serve.yaml, serve.env, agent.env, node-arbiter.env; /etc/tessera when the
#                                         prefix is /usr (the .deb), as GNUInstallDirs does
#
# `tessera version --paths` prints what an installed binary finds. tests/install/ checks the
# layout and the package.
#
# Worked example: cmake --install build --prefix /opt/t writes /opt/t/bin/tessera,
# /opt/t/etc/tessera/serve.yaml and units whose ExecStart is /opt/t/bin/tessera; cpack -G DEB
# writes /usr/bin/tessera, /etc/tessera/serve.yaml (conffiles) and ExecStart=/usr/bin/tessera.

# `make install` installs what is built; it does not build every test first (the install tests
# build what they install).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

install(TARGETS tessera RUNTIME DESTINATION bin)
install(TARGETS tessera_shim LIBRARY DESTINATION lib)
if(TARGET spank_tessera)
  install(TARGETS spank_tessera LIBRARY DESTINATION lib)
endif()
if(TARGET fake_nvml)
  install(TARGETS fake_nvml LIBRARY DESTINATION lib/tessera/fake NAMELINK_SKIP)
endif()
# data/ as share/tessera/ (the attribution files SOURCE.md, LICENSE, README.md travel with it).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/ DESTINATION share/tessera)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/config/serve.yaml ${PROJECT_SOURCE_DIR}/packaging/config/serve.env
              ${PROJECT_SOURCE_DIR}/packaging/config/agent.env ${PROJECT_SOURCE_DIR}/packaging/config/node-arbiter.env
        DESTINATION share/tessera/config)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION share/doc/tessera)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION share/doc/tessera/docs)
# The units and /etc/tessera: written at install time, when the prefix is known (see the script).
install(CODE "set(TESSERA_PACKAGING_DIR \"${PROJECT_SOURCE_DIR}/packaging\")
set(TESSERA_INSTALL_WORK_DIR \"${PROJECT_BINARY_DIR}/install-work\")")
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/TesseraInstallSystem.cmake)

# --- the .deb (cpack -G DEB in the build folder) ------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "tessera")
set(TESSERA_DEB_MAINTAINER "tessera maintainers <tessera@localhost>" CACHE STRING
  "The .deb's Maintainer field (NAME <EMAIL>)")
set(CPACK_PACKAGE_CONTACT "${TESSERA_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU sharing among tenants: placement, scheduling, enforcement, metering")
set(CPACK_PACKAGE_DESCRIPTION
  "tessera shares GPUs among tenants: it cuts GPUs (MIG, MPS, time-slice, whole), places work so the cluster\n"
  "does not fragment, keeps each tenant's guarantee, enforces shares inside the tenant's process\n"
  "(libtessera-shim.so) and meters use. This package holds the tessera CLI, the control plane\n"
  "(tessera-serve.service), the node agent (tessera-agent.service), the shim, the Slurm SPANK plugin\n"
  "(spank_tessera.so) with its node side (tessera-node-arbiter.service) and the bundled data.")
string(REPLACE ";" "" CPACK_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Depends from the binaries' shared libraries (dpkg-shlibdeps, package dpkg-dev).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The staging folder is the DESTDIR and the prefix stays /usr during packaging, so that the
# install script above sees /usr and writes /etc/tessera and the units' /usr/bin paths.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
# /etc/tessera/* are conffiles (an operator's edits survive upgrades); postinst/postrm tell a
# running systemd about the units (they enable nothing: systemctl enable --now tessera-serve).
set(TESSERA_DEB_CONTROL_DIR ${PROJECT_BINARY_DIR}/deb-control)
file(WRITE ${TESSERA_DEB_CONTROL_DIR}/conffiles
  "/etc/tessera/serve.yaml\n/etc/tessera/serve.env\n/etc/tessera/agent.env\n/etc/tessera/node-arbiter.env\n")
file(COPY ${PROJECT_SOURCE_DIR}/packaging/debian/postinst ${PROJECT_SOURCE_DIR}/packaging/debian/postrm
     DESTINATION ${TESSERA_DEB_CONTROL_DIR}
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${TESSERA_DEB_CONTROL_DIR}/conffiles ${TESSERA_DEB_CONTROL_DIR}/postinst ${TESSERA_DEB_CONTROL_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
