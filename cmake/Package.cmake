# Installing gpuhost (`cmake --install`) and packaging it (`cpack`): the binary, its documents,
# the deploy/ files and, on Linux, systemd units for `serve` and for supervised jobs.
#
#   Linux:    cmake --build --preset linux && (cd build/linux && cpack -G DEB)
#             -> gpuhost_<version>_<arch>.deb: /usr/bin/gpuhost (stripped), /usr/share/doc/gpuhost,
#                /usr/share/gpuhost/deploy, /usr/lib/systemd/system/gpuhost-serve.service and
#                gpuhost-run@.service, /usr/lib/sysusers.d/gpuhost.conf, /etc/default/gpuhost-serve
#             -> gpuhost-dbgsym_<version>_<arch>.ddeb: the DWARF, under /usr/lib/debug/.build-id
#   Windows:  cmake --build --preset windows && (cd build/windows && cpack -G ZIP)
#             -> gpuhost-<version>-windows-x64.zip, one folder: gpuhost.exe (stripped), the
#                libgcrypt DLLs, licenses/, doc/, deploy/
#             cmake --build --preset windows --target msi -> gpuhost-<version>-x64.msi (wixl)
include(GNUInstallDirs)

if(WIN32)
  # A Windows program folder is flat: gpuhost.exe and the DLLs it loads side by side.
  set(bin_dest .)
  set(doc_dest doc)
  set(deploy_dest deploy)
else()
  set(bin_dest ${CMAKE_INSTALL_BINDIR})
  set(doc_dest ${CMAKE_INSTALL_DOCDIR})
  set(deploy_dest ${CMAKE_INSTALL_DATADIR}/gpuhost/deploy)
endif()
install(TARGETS gpuhost RUNTIME DESTINATION ${bin_dest})
if(WIN32)
  install(FILES README.md ARCHITECTURE.md CONTRIBUTING.md DESTINATION .)
  install(DIRECTORY doc/ DESTINATION ${doc_dest} FILES_MATCHING PATTERN "*.md")
else()
  install(FILES README.md ARCHITECTURE.md CONTRIBUTING.md DESTINATION ${doc_dest})
  install(DIRECTORY doc/ DESTINATION ${doc_dest}/doc FILES_MATCHING PATTERN "*.md")
endif()
install(FILES deploy/prometheus.yml deploy/grafana-gpuhost-training.json DESTINATION ${deploy_dest})

if(WIN32)
  # libgcrypt and libgpg-error (LGPL-2.1+) beside gpuhost.exe, with their Debian copyright files
  # and the licence text: the LGPL's terms for shipping the libraries. Debian's DLLs carry their
  # DWARF (6.5 MB for libgcrypt); the packages get copies stripped of it (1.3 MB), the code
  # unchanged.
  set(package_dlls)
  foreach(dll ${GPUHOST_RUNTIME_DLLS})
    get_filename_component(name ${dll} NAME)
    set(stripped ${CMAKE_BINARY_DIR}/package-dlls/${name})
    add_custom_command(OUTPUT ${stripped}
                       COMMAND ${CMAKE_COMMAND} -E copy ${dll} ${stripped}
                       COMMAND ${CMAKE_STRIP} --strip-debug ${stripped}
                       DEPENDS ${dll} VERBATIM)
    list(APPEND package_dlls ${stripped})
  endforeach()
  add_custom_target(package_dlls ALL DEPENDS ${package_dlls})
  install(FILES ${package_dlls} DESTINATION .)
  install(FILES /usr/share/doc/libgcrypt-mingw-w64-dev/copyright DESTINATION licenses RENAME libgcrypt.txt)
  install(FILES /usr/share/doc/libgpg-error-mingw-w64-dev/copyright DESTINATION licenses RENAME libgpg-error.txt)
  install(FILES /usr/share/common-licenses/LGPL-2.1 DESTINATION licenses RENAME LGPL-2.1.txt)

  set(CPACK_GENERATOR ZIP)
  set(CPACK_PACKAGE_NAME gpuhost)
  set(CPACK_PACKAGE_VENDOR "gpuhost")
  set(CPACK_PACKAGE_FILE_NAME gpuhost-${PROJECT_VERSION}-windows-x64)
  set(CPACK_STRIP_FILES ON)
  include(CPack)

  # The MSI: deploy/windows/make-msi.sh stages the same install and runs wixl on it.
  find_program(GPUHOST_WIXL wixl)
  if(GPUHOST_WIXL)
    set(GPUHOST_MSI ${CMAKE_BINARY_DIR}/gpuhost-${PROJECT_VERSION}-x64.msi)
    add_custom_target(msi
      COMMAND ${PROJECT_SOURCE_DIR}/deploy/windows/make-msi.sh ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR}
              ${PROJECT_VERSION} ${GPUHOST_MSI}
      DEPENDS gpuhost package_dlls
      BYPRODUCTS ${GPUHOST_MSI}
      COMMENT "wixl: ${GPUHOST_MSI}"
      VERBATIM)
  endif()
  return()
endif()

# The package installs under /usr; the units and the /etc files name that layout whatever
# CMAKE_INSTALL_PREFIX a plain `cmake --install` uses.
set(GPUHOST_PACKAGE_PREFIX /usr)
set(GPUHOST_DOC_DIR ${GPUHOST_PACKAGE_PREFIX}/${CMAKE_INSTALL_DOCDIR})

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
# The binary is stripped and its DWARF goes to a second package, gpuhost-dbgsym (a .ddeb, as
# Debian's own builds make them), found by gdb through the build id. CPack does the split
# (objcopy --only-keep-debug, then strip); CPACK_STRIP_FILES would strip before it and leave
# nothing to split.
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/debian/postinst ${PROJECT_SOURCE_DIR}/deploy/debian/postrm
    ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${GPUHOST_PACKAGE_PREFIX})
include(CPack)
