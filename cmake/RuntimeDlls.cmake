# The DLLs the Windows build loads at run time, beside each executable that may load them: the
# loader searches only the application directory and System32 (platform/shared_library.h).
# libgcrypt (LGPL-2.1+) and libgpg-error (LGPL-2.1+) from Debian's libgcrypt-mingw-w64-dev give
# the Windows build SM3 and SM4 (platform/crypto_gcrypt_win32.h); packages ship the same files
# with their licences (cmake/Package.cmake). On Linux this is a no-op.
if(WIN32)
  find_file(GPUHOST_GCRYPT_DLL libgcrypt-20.dll PATH_SUFFIXES bin REQUIRED)
  find_file(GPUHOST_GPG_ERROR_DLL libgpg-error-0.dll PATH_SUFFIXES bin REQUIRED)
  set(GPUHOST_RUNTIME_DLLS ${GPUHOST_GCRYPT_DLL} ${GPUHOST_GPG_ERROR_DLL})
else()
  set(GPUHOST_RUNTIME_DLLS)
endif()

# gpuhost_runtime_dlls(target): copies GPUHOST_RUNTIME_DLLS next to `target` after each build.
function(gpuhost_runtime_dlls target)
  if(GPUHOST_RUNTIME_DLLS)
    add_custom_command(TARGET ${target} POST_BUILD
                       COMMAND ${CMAKE_COMMAND} -E copy_if_different ${GPUHOST_RUNTIME_DLLS} $<TARGET_FILE_DIR:${target}>
                       VERBATIM)
  endif()
endfunction()
