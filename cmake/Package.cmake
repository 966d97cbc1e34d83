# Installing gpuhost (`cmake --install`) and packaging it (`cpack`): the binary, its documents,
# the deploy/ files and, on Linux, systemd units for `serve` and for supervised jobs.
#
#   Linux:  cmake --build --preset linux && (cd build/linux && cpack -G DEB)
#           -> gpuhost_<version>_<arch>.deb: /usr/bin/gpuhost (stripped), /usr/share/doc/gpuhost,
#              /usr/share/gpuhost/deploy, /usr/lib/systemd/system/gpuhost-serve.service and
#              gpuhost-run@.service, /usr/lib/sysusers.d/gpuhost.conf, /etc/default/gpuhost-serve
#
# The package's binary is stripped (CPACK_STRIP_FILES); the build tree keeps the unstripped one,
# whose DWARF is the debug information for that build.
include(GNUInstallDirs)

# The package installs under /usr; the units and the /etc files name that layout whatever
# CMAKE_INSTALL_PREFIX a plain `cmake --install` uses.
set(GPUHOST_PACKAGE_PREFIX /usr)
set(GPUHOST_DOC_DIR ${GPUHOST_PACKAGE_PREFIX}/${CMAKE_INSTALL_DOCDIR})
install(TARGETS gpuhost RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES README.md ARCHITECTURE.md CONTRIBUTING.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY doc/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/doc FILES_MATCHING PATTERN "*.md")
install(FILES deploy/prometheus.yml deploy/grafana-gpuhost-training.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/gpuhost/deploy)

if(NOT WIN32)
  # The units name the installed binary; tests/integration/test_package.py verifies them.
  set(GPUHOST_BIN ${GPUHOST_PACKAGE_PREFIX}/${CMAKE_INSTALL_BINDIR}/gpuhost)
  set(unit_dir ${CMAKE_BINARY_DIR}/deploy/systemd)
  foreach(unit gpuhost-serve.service gpuhost-run@.service)
    configure_file(deploy/systemd/${unit}.in ${unit_dir}/${unit} @ONLY)
  endforeach()
  install(FILES ${unit_dir}/gpuhost-serve.service ${unit_dir}/gpuhost-run@.service
          DESTINATION lib/systemd/system)
  install(FILES deploy/systemd/gpuhost.sysusers DESTINATION lib/sysusers.d
          RENAME gpuhost.conf)
  install(FILES deploy/systemd/gpuhost-serve.default DESTINATION /etc/default
          RENAME gpuhost-serve)
  install(FILES deploy/systemd/gpuhost-jobs.README DESTINATION /etc/gpuhost/jobs
          RENAME README)

  set(CPACK_GENERATOR DEB)
  set(CPACK_PACKAGE_NAME gpuhost)
  set(CPACK_PACKAGE_VENDOR "gpuhost")
  set(CPACK_PACKAGE_CONTACT "gpuhost maintainers <maintainers@gpuhost.invalid>")
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "plan, check, set up and supervise GPU training hosts")
  set(CPACK_PACKAGE_DESCRIPTION
      "gpuhost plans GPU jobs, checks a host (doctor, bench), installs the stack (setup), supervises \
training with checkpoints that survive preemption (run) and serves GPU and training metrics \
(serve), with no change to the training code.")
  set(CPACK_STRIP_FILES ON)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_SECTION utils)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
      ${PROJECT_SOURCE_DIR}/deploy/debian/postinst ${PROJECT_SOURCE_DIR}/deploy/debian/postrm
      ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles)
  set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
  set(CPACK_PACKAGING_INSTALL_PREFIX ${GPUHOST_PACKAGE_PREFIX})
  include(CPack)
endif()
