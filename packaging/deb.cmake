# The Debian package for Slurm and bare-metal nodes: `cpack -G DEB` in a build folder (or
# packaging/check_deb.sh, which also installs it into a clean root). Everything `cmake --install`
# puts under the prefix, with the prefix /usr: gpumux, gpumuxd and its systemd unit, the shim and
# the simulated GPU, the SPANK plugin and the plugstack line that loads it (a conffile), the
# Kubernetes programs where they were built, the catalog and the examples. Dependencies are the
# shared libraries' packages (dpkg-shlibdeps). No maintainer script: enabling gpumuxd is the
# administrator's call (`systemctl enable --now gpumuxd`), and a purge leaves no file behind.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpumux)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "gpumux developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "share GPUs safely: memory quotas and compute shares for tenants of one GPU")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)  # the build's debug information stays in the build folder
if(TARGET gpumux_spank)  # its plugstack line, under /etc: kept on removal, gone on purge
  set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/deb/conffiles)
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_WARN_ON_ABSOLUTE_INSTALL_DESTINATION OFF)
include(CPack)
